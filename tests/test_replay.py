"""Op replay on captured inputs: fresh copies per run, recorded bytes, one changed policy."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from reproducers.replay import (
    ReplayPolicy,
    build_call,
    load_dump,
    replay_dump,
    replay_op,
    resolve_op,
)
from triage_agent.errors import InputError
from triage_agent.ledger import Ledger


def _index_add_case():
    g = torch.Generator().manual_seed(0)
    base = torch.zeros(8, 5)
    idx = torch.randint(0, 8, (200,), generator=g)
    src = torch.randn(200, 5, generator=g)
    return base, idx, src, base.clone().index_add_(0, idx, src)


def test_replay_reproduces_recorded_bytes_and_leaves_inputs_alone():
    base, idx, src, out = _index_add_case()
    res = replay_op("aten::index_add_", [base, 0, idx, src], recorded_outputs=[out], repeats=4)
    assert res.repeatable and res.distinct_runs == 1
    assert res.runs_matching_recorded == 4 and res.reproduces_recorded is True
    assert torch.count_nonzero(base) == 0  # in-place op ran on copies


def test_replay_detects_recorded_bytes_that_differ():
    base, idx, src, out = _index_add_case()
    tampered = out.clone()
    tampered.view(torch.int32)[0, 0] ^= 1  # one low-order bit
    res = replay_op("aten::index_add_", [base, 0, idx, src], recorded_outputs=[tampered], repeats=2)
    assert res.runs_matching_recorded == 0 and res.reproduces_recorded is False


def test_replay_dtype_policy_changes_the_bytes():
    base, idx, src, out = _index_add_case()
    res = replay_op(
        "aten::index_add_",
        [base, 0, idx, src],
        recorded_outputs=[out],
        repeats=2,
        policy=ReplayPolicy(dtype="float64"),
    )
    assert res.runs_matching_recorded == 0
    assert res.policy.changed() == ["dtype"]
    assert res.notes


def test_replay_checks_the_tracers_digest():
    from triage_agent.fingerprint.digest import digest_now

    base, idx, src, out = _index_add_case()
    good = replay_op(
        "aten::index_add_", [base, 0, idx, src], recorded_digests=[digest_now(out)], repeats=2
    )
    assert good.trace_digest_match == [True, True]
    other = digest_now(out + 1)
    bad = replay_op("aten::index_add_", [base, 0, idx, src], recorded_digests=[other], repeats=1)
    assert bad.trace_digest_match == [False]


def test_tracer_dump_needs_its_non_tensor_arguments(tmp_path):
    base, idx, src, out = _index_add_case()
    path = tmp_path / "s3_e17.pt"
    torch.save(
        {"name": "aten::index_add_", "scope": "m", "inputs": [base, idx, src], "outputs": [out]},
        path,
    )
    with pytest.raises(InputError, match="non-tensor argument.*dim"):
        load_dump(path)
    call = load_dump(path, {"dim": 0})
    assert call.op == "aten::index_add_" and call.args[1] == 0


def test_whole_call_dump_refuses_an_argument_it_would_not_use(tmp_path):
    base, idx, src, out = _index_add_case()
    path = tmp_path / "call.pt"
    torch.save({"op": "aten::index_add_", "args": [base, 0, idx, src], "kwargs": {}}, path)
    with pytest.raises(InputError, match="holds the whole call.*drop --arg dim"):
        load_dump(path, {"dim": 1})


def test_replay_dump_records_observed_evidence(tmp_path):
    base, idx, src, out = _index_add_case()
    path = tmp_path / "call.pt"
    torch.save(
        {"op": "aten::index_add_", "args": [base, 0, idx, src], "kwargs": {}, "outputs": [out]},
        path,
    )
    ev = replay_dump(path, tmp_path / "ws", repeats=3, hypotheses=["H-x"], roots=[tmp_path])
    assert ev.kind.value == "replay" and ev.result.value == "observed"
    assert ev.data.reproduces_recorded is True and "3/3" in ev.summary
    assert Ledger(tmp_path / "ws").state().evidence[0].id == ev.id


def test_replay_dump_one_policy_at_a_time(tmp_path):
    with pytest.raises(InputError, match="one policy at a time"):
        replay_dump(
            tmp_path / "x.pt", tmp_path, policy=ReplayPolicy(deterministic=True, dtype="float64")
        )


def test_replay_dump_outside_roots_is_refused(tmp_path):
    with pytest.raises(InputError):
        replay_dump("/etc/hostname", tmp_path, roots=[tmp_path])


@pytest.mark.parametrize(
    "name", ["", "-rf", "aten::no_such_op", "aten::add.NoOverload", "torch._C._foo", "os::system"]
)
def test_resolve_op_rejects(name):
    with pytest.raises(InputError):
        resolve_op(name)


def test_resolve_op_forms():
    assert resolve_op("aten::add.Tensor") is torch.ops.aten.add.Tensor
    assert resolve_op("aten.mm.default") is torch.ops.aten.mm.default
    assert resolve_op("torch.matmul") is torch.matmul


def test_build_call_too_many_tensors():
    with pytest.raises(InputError, match="more tensors"):
        build_call(torch.ops.aten.mm.default, [torch.ones(2, 2)] * 3)


def test_bad_dump_file_is_input_error(tmp_path):
    p = tmp_path / "garbage.pt"
    p.write_bytes(b"not a torch file")
    with pytest.raises(InputError, match="not a readable tensor dump"):
        load_dump(p)


def test_side_stream_policy_needs_cuda():
    base, idx, src, _ = _index_add_case()
    with pytest.raises(InputError, match="CUDA"):
        replay_op(
            "aten::index_add_", [base, 0, idx, src], repeats=1, policy=ReplayPolicy(stream="side")
        )


def test_cli_replay(tmp_path):
    base, idx, src, out = _index_add_case()
    torch.save(
        {"name": "aten::index_add_", "scope": "m", "inputs": [base, idx, src], "outputs": [out]},
        tmp_path / "d.pt",
    )
    cmd = [
        sys.executable,
        "-m",
        "triage_agent.cli.app",
        "reproduce",
        "replay",
        "d.pt",
        "--repeats",
        "2",
    ]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "dim" in res.stderr and "Traceback" not in res.stderr
    res = subprocess.run(
        [*cmd, "--arg", "dim=0"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert "2/2 runs reproduce" in res.stdout


@pytest.mark.gpu
def test_replay_index_add_cuda_deterministic_policy_repeats():
    base, idx, src, _ = _index_add_case()
    args = [base.cuda(), 0, idx.cuda(), src.cuda()]
    det = replay_op("aten::index_add_", args, repeats=20, policy=ReplayPolicy(deterministic=True))
    assert det.repeatable
    free = replay_op("aten::index_add_", args, repeats=20, policy=ReplayPolicy(deterministic=False))
    assert free.distinct_runs >= 1 and len(free.runs) == 20


@pytest.mark.gpu
def test_replay_side_stream_cuda():
    base, idx, src, _ = _index_add_case()
    args = [base.cuda(), 0, idx.cuda(), src.cuda()]
    res = replay_op(
        "aten::index_add_", args, repeats=3, policy=ReplayPolicy(stream="side", deterministic=True)
    )
    assert res.repeatable and res.device.startswith("cuda")


def test_a_replay_runs_under_the_settings_the_op_ran_under(tmp_path):
    # a long sum splits across threads: recorded on one thread, replayed here on two
    x = torch.randn(4_000_000, generator=torch.Generator().manual_seed(0))
    mine = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = x.sum()
    finally:
        torch.set_num_threads(mine)
    if mine == 1 or torch.equal(one, x.sum()):
        pytest.fail("this machine sums the same on one thread and on several: no test here")
    call = {"op": "aten::sum", "args": [x], "kwargs": {}, "outputs": [one]}
    plain, under = tmp_path / "plain.pt", tmp_path / "under.pt"
    torch.save(call, plain)
    torch.save({**call, "settings": {"torch.num_threads": "1"}}, under)
    ws = tmp_path / "ws"
    as_here = replay_dump(plain, ws, repeats=2, roots=[tmp_path])
    assert as_here.data.reproduces_recorded is False
    as_run = replay_dump(under, ws, repeats=2, roots=[tmp_path])
    assert as_run.data.reproduces_recorded is True, as_run.summary
    assert "under the run's settings torch.num_threads=1" in as_run.summary
    assert torch.get_num_threads() == mine  # put back

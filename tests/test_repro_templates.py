"""Every CPU template, run for real through the generator and the launcher (DeepSpeed on
gloo included). Assertions check that each verdict follows from what the template
reported, not a hard-coded root cause."""

from __future__ import annotations

import pytest

from reproducers.generator import generate
from reproducers.launcher import launch
from triage_agent.ledger import Ledger


def _run(ws, template, params=None, **kw):
    gen = generate({"template": template, "params": params or {}}, ws, ledger=Ledger(ws))
    ev = launch(gen.id, ws, **kw)
    assert ev.result.value != "error", ev.summary + " | " + str(ev.data.stderr_tail)
    out = ev.data.output
    assert out["template"] == template and out["status"] == "ok"
    assert out["params"] == gen.params
    return ev, out


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_cast_roundtrip_verdict_follows_the_bytes(tmp_path, low):
    ev, out = _run(tmp_path, "cast_roundtrip", {"low_dtype": low, "n": 512})
    d = out["digests"]
    assert out["details"]["non_representable_in_low_dtype"] > 0
    assert out["supported"] is (d["accumulate_fp32"] != d["accumulate_after_roundtrip"])
    assert (out["details"]["elements_differing"] > 0) is out["supported"]


def test_op_repeatability_cpu(tmp_path):
    ev, out = _run(
        tmp_path, "op_repeatability", {"op": "scatter_add_", "repeats": 3, "deterministic": True}
    )
    runs = out["digests"]["runs"]
    assert len(runs) == 3
    assert out["supported"] is (len(set(runs)) > 1)
    assert out["details"]["deterministic_algorithms"] is True
    assert out["details"]["cublas_workspace_config"] == ":4096:8"


def test_reduction_order_three_ranks_spawned(tmp_path, monkeypatch):
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # the launcher passes TMPDIR to the program
    ev, out = _run(tmp_path / "ws", "reduction_order", {"world_size": 3})
    # the per-rank result files are scratch: neither the run directory nor TMPDIR keeps them
    assert list(tmp_path.rglob("triage-ranks-*")) == []
    d = out["digests"]
    assert len(d["all_reduce_per_rank"]) == 3
    differs = any(x != d["fixed_order"] for x in d["all_reduce_per_rank"])
    agree = len(set(d["all_reduce_per_rank"])) == 1
    assert out["supported"] is (differs or not agree)
    assert out["details"]["order_sensitive"] is (d["fixed_order"] != d["reverse_order"])


@pytest.mark.slow
def test_reduction_order_two_ranks_under_the_deepspeed_launcher(tmp_path):
    # Two ranks: IEEE addition is commutative, so a correct all_reduce must equal a + b.
    ev, out = _run(
        tmp_path, "reduction_order", {"world_size": 2}, launcher="deepspeed", ranks=2, timeout_s=240
    )
    assert ev.argv[0].endswith("deepspeed") and "--num_gpus=2" in ev.argv
    assert out["supported"] is False
    assert len(out["digests"]["all_reduce_per_rank"]) == 2


def test_optimizer_init_real_deepspeed_engine(tmp_path):
    ev, out = _run(tmp_path, "optimizer_init", {"zero_stage": 0, "dtype": "bf16"}, timeout_s=400)
    det = out["details"]
    assert det["first_step_optimizer_calls"] == 1
    init_side_effect = bool(det["state_problems"])
    assert (det["init_steps"] > 0) <= init_side_effect  # a step at init is always a problem
    if init_side_effect or det.get("first_update_matches") == "step2":
        assert out["supported"] is True and ev.result.value == "supported"
    elif det.get("first_update_matches") in ("step1", "step1~"):
        assert out["supported"] is False
    else:
        assert out["supported"] is None


def test_rng_resume_fresh_process_real_checkpoint(tmp_path):
    ev, out = _run(tmp_path, "rng_resume", {"zero_stage": 1}, timeout_s=500)
    streams = out["details"]["streams"]
    saved, loaded = out["digests"]["saved"], out["digests"]["loaded"]
    for name in ("python", "numpy", "torch_cpu"):
        assert name in streams
        assert (saved["streams"][name] == loaded["streams"][name]) is streams[name].startswith(
            ("restored", "equal")
        )
    assert (saved["next_batch"] == loaded["next_batch"]) is (streams["data_cursor"] == "restored")
    assert out["supported"] is bool(out["details"]["not_restored"])
    assert set(out["details"]["not_restored"]) == {
        k for k, v in streams.items() if v == "NOT restored"
    }


def test_empty_contribution_real_deepspeed_function(tmp_path):
    ev, out = _run(tmp_path, "empty_contribution", {}, timeout_s=300)
    det = out["details"]
    failed = any(s != "ok" for s in det["outcome"]["empty"])
    differs = out["digests"]["empty"] != out["digests"]["control"]
    assert all(s == "ok" for s in det["outcome"]["control"])
    assert out["supported"] is (failed or differs)


def test_empty_contribution_control_function_is_refuted(tmp_path):
    # torch's local total norm treats [] as a zero contribution: the template must say so.
    ev, out = _run(tmp_path, "empty_contribution", {"function": "torch.nn.utils.get_total_norm"})
    assert out["supported"] is False and ev.result.value == "refuted"
    assert out["digests"]["empty"] == out["digests"]["control"]


def test_rng_advance_reports_each_generator(tmp_path):
    ev, out = _run(tmp_path, "rng_advance", {"function": "random:shuffle", "args": [[1, 2, 3, 4]]})
    gens = out["details"]["generators"]
    assert ev.result.value == "supported" and out["details"]["advanced"] == ["python"]
    assert (
        gens["python"]["advanced"] == "yes" and gens["python"]["before"] != gens["python"]["after"]
    )
    assert gens["torch_cpu"]["advanced"] == gens["numpy"]["advanced"] == "no"
    ev, out = _run(
        tmp_path, "rng_advance", {"function": "numpy.random:seed", "args": [5], "seed": 5}
    )
    # reseeding a generator with the value it was just seeded with leaves its state as it was
    assert ev.result.value == "refuted" and out["details"]["advanced"] == []
    ev, out = _run(tmp_path, "rng_advance", {"function": "torch:rand", "args": [3], "calls": 2})
    assert ev.result.value == "supported" and out["details"]["advanced"][0] == "torch_cpu"


def test_gpu_only_template_is_skipped_without_cuda(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this checks the no-CUDA path")
    gen = generate({"template": "async_lifetime"}, tmp_path, ledger=Ledger(tmp_path))
    ev = launch(gen.id, tmp_path)
    assert ev.result.value == "inconclusive" and ev.data.skipped is True
    assert ev.data.output["supported"] is None


def test_nccl_without_cuda_is_inconclusive_not_supported(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this checks the no-CUDA path")
    gen = generate(
        {"template": "reduction_order", "params": {"backend": "nccl"}},
        tmp_path,
        ledger=Ledger(tmp_path),
    )
    ev = launch(gen.id, tmp_path)
    assert ev.result.value == "inconclusive" and ev.data.skipped is True

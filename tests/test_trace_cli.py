import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from triage_agent.errors import InputError
from triage_agent.fingerprint import CaptureConfig, capture_command

DATA = Path(__file__).parent / "data_capture"
TRAIN = """
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for s in range(int(sys.argv[1])):
    m(torch.randn(3, 4)).pow(2).sum().backward(); opt.step(); opt.zero_grad()
sys.exit(int(sys.argv[2]))
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _script(tmp_path):
    p = tmp_path / "train.py"
    p.write_text(TRAIN)
    return p


def _triage(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_trace_cli_failing_command_keeps_partial_trace_and_exit_code(tmp_path):
    train = _script(tmp_path)
    r = _triage(
        "trace", "--steps", "1-2", "--level", "op", "--out", "tr", "--json",
        "--", sys.executable, str(train), "4", "3", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 3, r.stderr
    res = json.loads(r.stdout)
    assert res["exit_code"] == 3 and res["steps_traced"] == [1, 2]
    assert res["steps_seen"] == [0, 1, 2, 3]
    assert any("exited with code 3" in w for w in res["warnings"])
    f = res["files"][0]
    assert f["rank"] == 0 and f["complete"] and len(f["sha256"]) == 64
    lines = (tmp_path / "tr" / "trace_rank00000.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["type"] == "header"
    assert any(json.loads(x).get("name") == "aten::addmm" for x in lines)


def test_trace_window_that_never_occurs_is_reported(tmp_path):
    train = _script(tmp_path)
    cfg = CaptureConfig(out_dir=tmp_path / "w", steps=(40, 41), level="module")
    res = capture_command([sys.executable, str(train), "3", "0"], cfg, timeout_s=120)
    assert res.exit_code == 0 and res.steps_traced == [] and res.files == []
    assert any("step range 40-41 never occurred: the run saw steps 0-2" in w for w in res.warnings)


def test_trace_killed_rank_keeps_completed_steps(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text(TRAIN.replace("sys.exit(int(sys.argv[2]))", "import time; time.sleep(60)"))
    cfg = CaptureConfig(out_dir=tmp_path / "k", steps=(0, 1), level="module")
    res = capture_command([sys.executable, str(slow), "2", "0"], cfg, timeout_s=15)
    assert res.timed_out and res.exit_code is None
    assert res.steps_traced == [0, 1]
    assert not res.files[0].complete  # no end record, completed steps kept


def test_trace_unwritable_out_dir_and_empty_command(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="not writable"):
        capture_command(["python", "-c", "0"], CaptureConfig(out_dir=blocker / "sub"))
    r = _triage("trace", "--out", str(blocker / "sub"), "--", "python", "-c", "0", cwd=tmp_path)
    assert r.returncode == 2 and "not writable" in r.stderr and "Traceback" not in r.stderr
    r = _triage("trace", "--steps", "9-3", "--", "python", "-c", "0", cwd=tmp_path)
    assert r.returncode == 2 and "invalid step range" in r.stderr


def test_trace_level_none_applies_policies_and_traces_nothing(tmp_path):
    probe = "import torch; print('det', torch.are_deterministic_algorithms_enabled())"
    cfg = CaptureConfig(out_dir=tmp_path / "n", level="none", policies=["deterministic"])
    res = capture_command([sys.executable, "-c", probe], cfg, timeout_s=60)
    # the script never asks for determinism: only the injected code can have turned it on
    assert res.exit_code == 0 and res.files == []
    assert Path(res.stdout_log).read_text().strip() == "det True"
    cfg = CaptureConfig(out_dir=tmp_path / "n2", level="none")
    res = capture_command([sys.executable, "-c", probe], cfg, timeout_s=60)
    assert res.exit_code == 0 and res.files == []
    assert Path(res.stdout_log).read_text().strip() == "det False"


def test_trace_unknown_policy_rejected_before_launch(tmp_path):
    from triage_agent import policies

    with pytest.raises(ValueError, match="unknown policy 'no-such-policy'"):
        CaptureConfig(out_dir=tmp_path / "n", policies=["no-such-policy"])
    assert "no-such-policy" not in policies.POLICIES
    marker = tmp_path / "ran"
    r = _triage(
        "trace", "--policy", "no-such-policy", "--out", str(tmp_path / "t"), "--",
        sys.executable, "-c", f"open({str(marker)!r}, 'w')", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "unknown policy 'no-such-policy'" in r.stderr
    assert "Traceback" not in r.stderr and not marker.exists()


def test_parse_ranks_messages_and_cap():
    from triage_agent.fingerprint.config import MAX_RANKS, parse_ranks

    assert parse_ranks("0,2-3,2") == [0, 2, 3]
    for bad in ("a", "1-", "0,,1"):
        with pytest.raises(InputError, match="invalid rank list") as exc:
            parse_ranks(bad)
        assert "step" not in str(exc.value)
    with pytest.raises(InputError, match="end comes before the start"):
        parse_ranks("3-1")
    with pytest.raises(InputError, match=f"limit of {MAX_RANKS - 1}"):
        parse_ranks("0-1000000000")
    assert parse_ranks(f"{MAX_RANKS - 1}") == [MAX_RANKS - 1]


def test_trace_cli_huge_rank_range_is_one_line_error(tmp_path):
    r = _triage("trace", "--ranks", "0-1000000000", "--", "python", "-c", "0", cwd=tmp_path)
    assert r.returncode == 2 and "limit of" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("deepspeed") is None, reason="deepspeed launcher not on PATH")
def test_trace_deepspeed_two_ranks_zero2(tmp_path):
    cfg = CaptureConfig(out_dir=tmp_path / "ds", steps=(1, 2), level="module", run_id="ds")
    port = str(_free_port())  # other jobs on this host may hold the default port
    argv = ["deepspeed", "--num_gpus", "2", "--master_port", port]
    argv += [str(DATA / "ds_train.py"), str(tmp_path), "2", "4"]
    res = capture_command(argv, cfg, timeout_s=300)
    assert res.exit_code == 0, Path(res.stderr_log).read_text()[-2000:]
    assert sorted(f.rank for f in res.files) == [0, 1]
    assert res.steps_traced == [1, 2] and res.steps_seen == [0, 1, 2, 3]
    for f in res.files:
        assert f.steps == [1, 2] and f.complete
        evs = [json.loads(x) for x in Path(f.path).read_text().splitlines()[1:]]
        evs = [e for e in evs if e["type"] == "event"]
        scopes = {e["scope"] for e in evs if e["kind"] == "module"}
        assert {"0", "2"} <= scopes  # unwrapped from the engine: '0', not 'module.0'
        colls = [e for e in evs if e["kind"] == "collective"]
        assert colls and all(e["caller"] and "deepspeed" in e["caller"] for e in colls)
        assert any(e["kind"] == "optimizer" for e in evs)
        # each step's optimizer events are counted once: engine step, not the inner optimizer
        ends = [json.loads(x) for x in Path(f.path).read_text().splitlines()]
        assert [e["step"] for e in ends if e["type"] == "step_end"] == [1, 2]


def test_trace_into_a_directory_holding_a_trace_is_refused(tmp_path):
    train = _script(tmp_path)
    first = _triage(
        "trace", "--out", "tr", "--", sys.executable, str(train), "2", "0", cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    before = {p: p.read_bytes() for p in (tmp_path / "tr").glob("trace_rank*.jsonl")}
    assert before
    again = _triage(
        "trace", "--out", "tr", "--", sys.executable, str(train), "2", "0", cwd=tmp_path
    )
    assert again.returncode == 2 and "already holds a trace" in again.stderr
    assert {p: p.read_bytes() for p in (tmp_path / "tr").glob("trace_rank*.jsonl")} == before
    # without --out every invocation gets its own directory
    r = _triage("trace", "--json", "--", sys.executable, str(train), "2", "0", cwd=tmp_path)
    assert r.returncode == 0 and "/.triage/traces/run-" in json.loads(r.stdout)["out_dir"]


def test_trace_nonsense_timeout_and_no_trace_written_are_said(tmp_path):
    r = _triage("trace", "--timeout", "-1", "--", sys.executable, "-c", "0", cwd=tmp_path)
    assert r.returncode == 2 and "--timeout must be between" in r.stderr
    res = capture_command([sys.executable, "-c", "print(1)"], CaptureConfig(out_dir=tmp_path / "n"))
    assert res.exit_code == 0 and res.files == []
    assert any("no process wrote a trace" in w for w in res.warnings)


def test_trace_dump_pattern_that_matches_nothing_is_said(tmp_path):
    train = _script(tmp_path)
    cfg = CaptureConfig(out_dir=tmp_path / "d", level="op", dump=["addmm"])
    res = capture_command([sys.executable, str(train), "2", "0"], cfg, timeout_s=120)
    assert res.files and any("no event matched --dump addmm" in w for w in res.warnings)
    cfg = CaptureConfig(out_dir=tmp_path / "e", level="op", dump=["aten::addmm"])
    res = capture_command([sys.executable, str(train), "2", "0"], cfg, timeout_s=120)
    assert not any("no event matched" in w for w in res.warnings)
    assert list((tmp_path / "e" / "dumps").glob("rank*/*.pt"))

"""An injected trace (`triage trace -- COMMAND`) uses the C++ tracer where it is built, and the
Python tracer otherwise; on the same real job both write the same records."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from triage_agent.fingerprint import CaptureConfig, capture_command
from triage_agent.fingerprint.native import load, unavailable_reason
from triage_agent.runs import free_port

DATA = Path(__file__).parent / "data_capture"
pytestmark = pytest.mark.skipif(
    load() is None, reason=f"the native tracer cannot be built here: {unavailable_reason()}"
)

JOB = """
import sys
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(
    torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16), torch.nn.LayerNorm(16)
)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(4, 16)
for _ in range(4):
    m(x).square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
"""


def _trace(tmp_path: Path, name: str, argv: list[str], level: str, native: bool):
    cfg = CaptureConfig(out_dir=tmp_path / name, steps=(1, 2), level=level)
    env = dict(os.environ)
    if not native:
        env["TRIAGE_NATIVE"] = "0"
    # a DeepSpeed rank may first (re)build its shm op: minutes on a loaded machine
    res = capture_command(argv, cfg, env=env, timeout_s=900)
    assert res.exit_code == 0, Path(res.stderr_log).read_text()[-2000:]
    assert res.files, res.warnings
    out = {}
    for f in sorted(res.files, key=lambda f: f.rank):
        lines = Path(f.path).read_text().splitlines()
        head, end = json.loads(lines[0]), json.loads(lines[-1])
        body = [ln for ln in lines if '"type":"event"' in ln or '"type":"step_end"' in ln]
        out[f.rank] = (head["tracer"], end.get("note", ""), body)
    return out


def _same_records(py: dict, cc: dict) -> None:
    assert sorted(py) == sorted(cc)
    for rank in py:
        (py_path, py_note, py_lines), (cc_path, cc_note, cc_lines) = py[rank], cc[rank]
        assert (py_path, cc_path) == ("python", "native")
        assert "TRIAGE_NATIVE=0" in py_note and "Python tracer" not in cc_note
        events = [json.loads(ln) for ln in cc_lines if '"type":"event"' in ln]
        assert events and all(e["outputs"] for e in events if e["kind"] == "module")
        assert py_lines == cc_lines  # events, digests, call sites and step ends, line for line


@pytest.mark.parametrize("level", ["module", "op"])
def test_injected_torch_job_writes_the_same_records_on_both_paths(tmp_path, level):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    argv = [sys.executable, str(script)]
    py = _trace(tmp_path, "py", argv, level, native=False)
    cc = _trace(tmp_path, "cc", argv, level, native=True)
    kinds = {json.loads(ln)["kind"] for ln in cc[0][2] if '"type":"event"' in ln}
    assert ("op" if level == "op" else "module") in kinds and "optimizer" in kinds
    _same_records(py, cc)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("deepspeed") is None, reason="deepspeed launcher not on PATH")
def test_injected_deepspeed_zero2_run_writes_the_same_records_on_both_paths(tmp_path):
    def argv() -> list[str]:  # a port of its own: other jobs on this host may hold the default
        port = ["--master_port", str(free_port())]
        return [
            "deepspeed",
            "--num_gpus",
            "2",
            *port,
            str(DATA / "ds_train.py"),
            str(tmp_path),
            "2",
            "4",
        ]

    py = _trace(tmp_path, "py", argv(), "module", native=False)
    cc = _trace(tmp_path, "cc", argv(), "module", native=True)
    assert sorted(cc) == [0, 1]
    assert any('"kind":"collective"' in ln for ln in cc[0][2])
    _same_records(py, cc)

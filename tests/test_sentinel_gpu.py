"""The sentinel on one CUDA device: a real atomics case's two runs, recorded and located with
no relaunch, and the recorded runs' metric bits equal to an unrecorded launch's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from triage_agent.compare.sentinel import device_suspects, locate
from triage_agent.metrics import diff_metrics, load_metrics

pytestmark = pytest.mark.gpu

CASE = Path(__file__).parent / "cases" / "gpu-atomics-index-add"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_sentinel_locates_an_atomics_divergence_on_a_gpu(tmp_path):
    def record(name: str, *flags: str) -> Path:
        rec, out = tmp_path / f"rec_{name}", tmp_path / f"out_{name}"
        argv = [sys.executable, "train.py", "--out", str(out), *flags]
        proc = subprocess.run(
            ["triage", "record", "--sentinel", "--out", str(rec), "--", *argv],
            cwd=CASE,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return rec

    a = record("a", "--deterministic")
    b = record("b")
    plain = tmp_path / "out_plain"
    proc = subprocess.run(
        [sys.executable, "train.py", "--out", str(plain), "--deterministic"],
        cwd=CASE,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    same = diff_metrics(load_metrics(plain), load_metrics(tmp_path / "out_a"))
    assert same.first_step is None and same.complete  # the sentinel moved no metric bit
    parted = diff_metrics(load_metrics(tmp_path / "out_a"), load_metrics(tmp_path / "out_b"))
    assert parted.first_step is not None
    found = locate(a, b)
    # the sentinel's step is the metrics' or earlier: an update shows in the next loss
    assert found.step is not None and found.step <= parted.first_step
    assert found.ranks == [0] and found.starts == [0]
    assert any("parameter" in f.record for f in found.firsts)
    assert not device_suspects(b).suspects

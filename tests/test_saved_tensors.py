"""keep-saved: the backward reads what its forward saved, and the write over it is named."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from triage_agent.saved_tensors import REPORT

JOB = textwrap.dedent(
    """
    import json, sys
    import torch
    if sys.argv[1] == "keep":
        from triage_agent.saved_tensors import install
        install()
    from triage_agent.metrics import MetricLog

    class Overwrite(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.data.mul_(0.5)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 0.5

    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(4, 8)
    with MetricLog(sys.argv[2]) as log:
        h = x @ w
        penalty = h.pow(2).mean()            # pow saves h for its backward
        y = Overwrite.apply(h) if sys.argv[3] == "write" else h * 0.5
        (penalty + y.sum()).backward()
        print(json.dumps(w.grad.flatten().tolist()))
    """
)


def _run(tmp_path: Path, keep: bool, write: bool) -> list[float]:
    out = tmp_path / ("keep" if keep else "plain") / ("write" if write else "clean")
    out.mkdir(parents=True)
    job = tmp_path / "job.py"
    job.write_text(JOB)
    res = subprocess.run(
        [
            sys.executable,
            str(job),
            "keep" if keep else "plain",
            str(out),
            "write" if write else "clean",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_keep_saved_gives_the_backward_what_was_saved_and_names_the_write(tmp_path):
    clean = _run(tmp_path, keep=False, write=False)
    written = _run(tmp_path, keep=False, write=True)
    assert written != clean  # the write past the version counter changes the gradient
    kept = _run(tmp_path, keep=True, write=True)
    assert kept == clean  # bit for bit, with the copies
    report = json.loads((tmp_path / "keep" / "write" / REPORT).read_text())
    (entry,) = report.values()
    assert entry["at"].endswith("job.py:12")  # x.data.mul_(0.5)
    assert entry["saved_at"].endswith("job.py:24")  # h.pow(2)
    assert entry["times"] >= 1


def test_keep_saved_changes_nothing_where_nothing_writes_over_a_saved_tensor(tmp_path):
    assert _run(tmp_path, keep=True, write=False) == _run(tmp_path, keep=False, write=False)
    assert not (tmp_path / "keep" / "clean" / REPORT).exists()

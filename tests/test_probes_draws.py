"""The probes for draws outside the training step, on small real source files: a helper's
draw beside a step that draws from the same global stream is reported with its line and
call; a generator of its own, a draw of the step itself and a stream the step does not use
are not; a file that shows no step is reported with lower confidence, saying so."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from probes.scan import ScanRequest, run_scan

DRAW_PROBES = [f"rng-{s}-draw-outside-step" for s in ("torch", "numpy", "python")]
CASES = Path(__file__).resolve().parent / "cases"

TRAIN = """import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.fc(x))


def train_step(model, opt, x):
    mask = torch.rand(x.shape) > 0.5
    loss = model(x * mask).sum()
    loss.backward()
    opt.step()


def pick_subset(rows, k):
    return torch.randperm(rows)[:k]


def pick_subset_own(rows, k):
    g = torch.Generator().manual_seed(1)
    return torch.randperm(rows, generator=g)[:k]
"""


def _scan(*paths: Path):
    res = run_scan(ScanRequest(paths=[str(p) for p in paths], probes=DRAW_PROBES, exclude_globs=[]))
    assert res.files_scanned == len(paths) and not res.parse_errors
    return res.findings


def test_draws_a_helper_beside_a_step_that_uses_dropout(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    (f,) = _scan(tmp_path / "train.py")
    assert (f.probe_id, f.file.endswith("train.py"), f.line_start) == (
        "rng-torch-draw-outside-step",
        True,
        23,
    )
    assert f.function == "pick_subset" and f.snippet.strip() == "return torch.randperm(rows)[:k]"
    assert "`torch.randperm(rows)` in `pick_subset` draws from torch's global generator" in (
        f.rationale
    )
    assert "the training step draws from it too, at line 9 (nn.Dropout(0.1)" in f.rationale
    assert "rng_advance" in f.rationale


def test_draws_a_helper_in_a_file_without_a_step_is_reported_weaker(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN.split("def pick_subset(")[0])
    (tmp_path / "evaluate.py").write_text(
        "import torch\n\n\ndef pick_subset(rows, k):\n    return torch.randperm(rows)[:k]\n"
    )
    (tmp_path / "both.py").write_text(TRAIN)
    findings = _scan(tmp_path / "train.py", tmp_path / "evaluate.py", tmp_path / "both.py")
    by_file = {Path(f.file).name: f for f in findings}
    assert set(by_file) == {"evaluate.py", "both.py"}
    weak, seen = by_file["evaluate.py"], by_file["both.py"]
    assert weak.line_start == 5 and "this file holds no training step" in weak.rationale
    assert weak.score == pytest.approx(seen.score / 2)


def test_draws_a_stream_the_step_does_not_use_is_not_reported(tmp_path):
    src = TRAIN.replace(
        "def pick_subset(rows, k):\n    return torch.randperm(rows)[:k]",
        "def pick_subset(rows, k):\n    return np.random.choice(rows, k)",
    )
    (tmp_path / "train.py").write_text("import numpy as np\n" + src)
    assert _scan(tmp_path / "train.py") == []
    # the same helper beside a step that shuffles with numpy is reported
    (tmp_path / "train.py").write_text(
        "import numpy as np\n"
        + src.replace(
            "mask = torch.rand", "x = x[np.random.permutation(len(x))]\n    mask = torch.rand"
        )
    )
    (f,) = _scan(tmp_path / "train.py")
    assert (
        f.probe_id == "rng-numpy-draw-outside-step" and "np.random.choice(rows, k)" in f.rationale
    )


@pytest.mark.parametrize(
    "case", ["torch-eval-pass-rng", "torch-metrics-hook-draws", "torch-numpy-stream-augment"]
)
def test_draws_found_at_the_drawing_line_of_corpus_cases(case):
    """A helper that moves the step's stream in another file: the scan around the drawing
    line names it."""
    expected = tomllib.loads((CASES / case / "expected.toml").read_text())["expected"]
    file, line = expected["location"].split(":")
    res = run_scan(
        ScanRequest(around=[str(CASES / case / expected["location"])], probes=DRAW_PROBES)
    )
    assert [(Path(f.file).name, f.line_start) for f in res.findings] == [(file, int(line))]

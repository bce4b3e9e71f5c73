"""Shared builders for the MCP server tests (no tests here): a real workspace, two runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import torch

from triage_agent.metrics import MetricLog


def write_runs(root: Path, steps: int = 6, differ_from: int | None = 3) -> None:
    """Two one-rank runs whose float32 loss bits first differ at ``differ_from`` (one ULP)."""
    for run in ("a", "b"):
        with MetricLog(root / "runs" / run, rank=0) as log:
            for s in range(steps):
                loss = torch.tensor(2.0 / (s + 1), dtype=torch.float32)
                if run == "b" and differ_from is not None and s >= differ_from:
                    loss = torch.nextafter(loss, torch.tensor(100.0))
                log.log(s, loss=loss, lr=1e-3)


CASE_TOML = """
[case]
name = "toy"
mismatch_step = 3
source_roots = ["src"]

[runs.a]
metrics = "runs/a"
launch = [["python", "-c", "print('a')"]]

[runs.b]
metrics = "runs/b"
"""


def make_workspace(root: Path, with_case_file: bool = True) -> Path:
    write_runs(root)
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "train.py").write_text("x = 1\n")
    if with_case_file:
        (root / "triage.toml").write_text(CASE_TOML)
    return root


def run_async(fn: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(fn)


TRAIN_SRC = """import torch


def train(model, steps):
    for step in range(steps):
        torch.manual_seed(step)
        model.step()
"""

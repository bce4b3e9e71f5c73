"""Shared builders for the MCP server tests (no tests here): a real workspace, two runs."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import torch
from mcp.client.stdio import StdioServerParameters

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


def case_toml(name: str, *launches: list[str]) -> str:
    """The case file of ``write_runs``' two runs (metrics under runs/, mismatch at step 3,
    sources under src/): run a launches ``launches[0]``, run b ``launches[1]``, if given."""
    text = f'[case]\nname = "{name}"\nmismatch_step = 3\nsource_roots = ["src"]\n'
    for i, run in enumerate("ab"):
        text += f'\n[runs.{run}]\nmetrics = "runs/{run}"\n'
        if i < len(launches):
            text += f"launch = [{json.dumps(launches[i])}]\n"
    return text


CASE_TOML = case_toml("toy", ["python", "-c", "print('a')"])


def make_workspace(root: Path, with_case_file: bool = True) -> Path:
    write_runs(root)
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "train.py").write_text("x = 1\n")
    if with_case_file:
        (root / "triage.toml").write_text(CASE_TOML)
    return root


def run_async(fn: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(fn)


def triage_mcp_exe() -> str:
    """The installed ``triage-mcp`` console script."""
    exe = shutil.which("triage-mcp") or os.path.join(os.path.dirname(sys.executable), "triage-mcp")
    assert os.path.exists(exe), "triage-mcp console script is not installed"
    return exe


def stdio_params(ws: Path) -> StdioServerParameters:
    """``triage-mcp --workspace WS`` as a real client starts it, over stdio."""
    return StdioServerParameters(
        command=triage_mcp_exe(), args=["--workspace", str(ws)], cwd=str(ws)
    )


TRAIN_SRC = """import torch


def train(model, steps):
    for step in range(steps):
        torch.manual_seed(step)
        model.step()
"""


RELAUNCH_TRAIN = """import argparse
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--perturb-at", type=int, default=-1)
a = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
with MetricLog(a.out, rank=0) as log:
    for step in range(4):
        if step == a.perturb_at:
            with torch.no_grad():  # one weight nudged between steps, outside every module
                model[0].weight[0, 0] += 1e-3
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""

RELAUNCH_TOML = """
[case]
name = "relaunch"
source_roots = ["src"]

[runs.a]
metrics = "{out}"
cwd = "src"
launch = [["{python}", "train.py", "--out", "{out}"]]

[runs.b]
metrics = "{out}"
cwd = "src"
launch = [["{python}", "train.py", "--out", "{out}", "--perturb-at", "2"]]
"""


def make_relaunch_workspace(root: Path) -> Path:
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "train.py").write_text(RELAUNCH_TRAIN)
    (root / "triage.toml").write_text(RELAUNCH_TOML)
    return root


LOWP_SRC = """import torch
import torch.distributed as dist


def reduce_grads(grad):
    low = grad.to(torch.bfloat16)
    dist.all_reduce(low)
    grad.copy_(low.float())
"""


def assert_refused(results: dict[str, Any], said: dict[str, str]) -> None:
    """Each named tool result is an error whose one line says ``said[name]``, no traceback."""
    for name, words in said.items():
        text = results[name].content[0].text
        assert results[name].is_error and words in text, (name, results[name].content)
        assert "Traceback" not in text


def stdio_server(ws: Path) -> StdioServerParameters:
    """`triage-mcp` serving ``ws``, started by a real client as a subprocess on stdio."""
    exe = shutil.which("triage-mcp") or os.path.join(os.path.dirname(sys.executable), "triage-mcp")
    assert os.path.exists(exe), "triage-mcp console script is not installed"
    return StdioServerParameters(command=exe, args=["--workspace", str(ws)], cwd=str(ws))

"""rebind-optimizer: an optimizer built before a layer was swapped updates the layer the model
no longer uses; the policy hands it the model's current parameters and names the swap."""

from __future__ import annotations

import json
import subprocess
import sys

from triage_agent.metrics import diff_metrics, load_metrics
from triage_agent.optimizer_membership import REPORT
from triage_agent.workflow.boundary_state import PointDiff, membership_arms

JOB = """
import argparse, sys
import torch
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out"); p.add_argument("--order", choices=["swap-late", "swap-early"])
a = p.parse_args()
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))

def widen(model):
    old = model[0]
    new = torch.nn.Linear(6, 8)
    new.load_state_dict(old.state_dict())
    model[0] = new  # same values, new Parameters

if a.order == "swap-early":
    widen(net)
opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
if a.order == "swap-late":
    widen(net)  # LATE SWAP
x = torch.randn(16, 6, generator=torch.Generator().manual_seed(1))
with MetricLog(a.out, rank=0) as log:
    for step in range(4):
        loss = net(x).square().mean()
        loss.backward(); opt.step(); opt.zero_grad()
        log.log(step, loss=loss.detach())
"""


def _run(tmp_path, name, order, *policy):
    out = tmp_path / name
    argv = [sys.executable, str(tmp_path / "job.py"), "--out", str(out), "--order", order]
    if policy:
        argv = [
            "triage",
            "trace",
            "--level",
            "none",
            "--policy",
            policy[0],
            "--out",
            str(tmp_path / f"trace-{name}"),
            "--",
            *argv,
        ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return load_metrics(out), out


def test_the_policy_gives_the_optimizer_the_swapped_layer_and_names_the_swap(tmp_path):
    (tmp_path / "job.py").write_text(JOB)
    early, _ = _run(tmp_path, "early", "swap-early")
    late, _ = _run(tmp_path, "late", "swap-late")
    rebound, out = _run(tmp_path, "rebound", "swap-late", "rebind-optimizer")
    assert diff_metrics(early, late).first_step == 1  # the first layer never trains
    same = diff_metrics(early, rebound)
    assert same.first_step is None and same.complete and same.common_steps == [0, 1, 2, 3]
    report = json.loads((out / REPORT).read_text())
    assert sorted(report) == ["0.bias", "0.weight"]
    line = JOB.splitlines().index("    widen(net)  # LATE SWAP") + 1
    assert {v["at"] for v in report.values()} == {f"{tmp_path / 'job.py'}:{line}"}


def _diff(point: str, a: str, b: str) -> PointDiff:
    return PointDiff.model_validate(
        {
            "point": point,
            "rank": 0,
            "between": "A vs B",
            "diff": {
                "equal": False,
                "differences": [
                    {
                        "path": "model_structure.outside_optimizer",
                        "section": "scalar",
                        "reason": "value",
                        "a": a,
                        "b": b,
                    }
                ],
                "only_in_a": [],
                "only_in_b": [],
                "compared": 10,
            },
        }
    )


def test_membership_arms_rebind_the_run_whose_optimizer_leaves_parameters_out():
    (arm,) = membership_arms([_diff("init", "str:''", "str:'0.bias,0.weight'")])
    assert arm.run == "b" and arm.intervention == "rebind-optimizer"
    assert "0.bias" in arm.hypothesis.statement
    (arm,) = membership_arms([_diff("init", "str:'head.weight'", "str:''")])
    assert arm.run == "a"
    # both leave parameters out (a frozen part kept outside on purpose): no one run to rebind
    assert membership_arms([_diff("init", "str:'x'", "str:'x,y'")]) == []

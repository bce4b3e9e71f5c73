"""One run fails where the other completes: the failure is reported, its site named, and
nothing is claimed about its cause. A real small job, built here."""

from __future__ import annotations

from triage_agent.ledger import Ledger
from triage_agent.records import Case, EvidenceKind, RunSpec
from triage_agent.workflow.engine import run_workflow
from triage_agent.workflow.options import RunOptions

NORMS = """import torch


def total_norm(grads):
    return torch.stack([g.norm() for g in grads]).norm()
"""

TRAIN = """import sys
import torch
from norms import total_norm
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
skip = len(sys.argv) > 2
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(3):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        grads = [] if skip and step == 1 else [p.grad for p in model.parameters()]
        norm = total_norm(grads)
        opt.step()
        log.log(step, loss=loss.detach(), grad_norm=norm)
"""


def test_a_run_that_crashes_is_reported_at_its_own_frame_and_left_unknown(tmp_path):
    (tmp_path / "norms.py").write_text(NORMS)
    (tmp_path / "train.py").write_text(TRAIN)

    def run(name, extra):
        return RunSpec(
            name=name,
            metrics="{out}",
            cwd=str(tmp_path),
            launch=[["{python}", "train.py", "{out}", *extra]],
        )

    case = Case(
        name="crash",
        workspace=str(tmp_path / "ws"),
        run_a=run("a", []),
        run_b=run("b", ["empty"]),
        timeout_s=120,
    )
    ledger = Ledger(case.workspace)
    v = run_workflow(case, ledger, RunOptions(timeout_s=120, budget_minutes=5)).verdict
    assert v is not None and v.classification.value == "unknown"
    # the innermost frame of the job's own code, not torch's
    assert v.location.startswith(f"{tmp_path / 'norms.py'}:5 (total_norm)"), v.location
    assert "run B fails (RuntimeError: stack expects a non-empty TensorList)" in v.statement
    ev = next(e for e in ledger.state().evidence if e.id in v.evidence)
    assert ev.kind == EvidenceKind.metrics and ev.data.failing_run == "b"
    assert ev.data.rerun["runs"] == ["b", "a"]
    assert ledger.state().verdict == v

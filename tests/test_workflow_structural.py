"""An event one run executes and the other does not becomes "this extra call changes state",
tested by suppressing the function it came from in that run. A real small job: run B primes
its AdamW with one zero-gradient step during initialisation (the init-time optimizer step
class), from a helper module; nothing in the workflow knows that."""

from __future__ import annotations

from pathlib import Path

from triage_agent.compare.result import Candidate
from triage_agent.ledger import Ledger
from triage_agent.ledger_view import discriminator_rows, verdict_basis
from triage_agent.records import Case, RunSpec
from triage_agent.workflow.engine import RunOptions, run_workflow
from triage_agent.workflow.structural import call_site, extra_call_arms

HELPERS = '''"""Optimizer set-up helpers."""

import torch


def prime(opt):
    """Build the optimizer state up front (a zero gradient for every parameter, one step)."""
    for group in opt.param_groups:
        for p in group["params"]:
            p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)
'''

TRAIN = """import sys
import torch
from helpers import prime
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
if "--prime" in sys.argv:
    prime(opt)
x = torch.randn(16, 4)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(4):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def _case(tmp_path: Path) -> Case:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(TRAIN)
    (src / "helpers.py").write_text(HELPERS)

    def run(name: str, *extra: str) -> RunSpec:
        return RunSpec(
            name=name,
            metrics="{out}",
            cwd=str(src),
            launch=[["{python}", "train.py", "{out}", *extra]],
        )

    return Case(
        name="extra-call",
        workspace=str(tmp_path / "ws"),
        source_roots=[str(src)],
        run_a=run("a"),
        run_b=run("b", "--prime"),
        timeout_s=120,
    )


def test_a_call_site_names_the_function_around_it(tmp_path):
    case = _case(tmp_path)
    src = Path(case.run_b.cwd)
    site = call_site(f"{src / 'helpers.py'}:11", str(src))
    assert site.target == "helpers:prime"
    # module level and the script itself name nothing a patch can reach
    assert call_site(f"{src / 'helpers.py'}:3", str(src)).target is None
    script = Candidate(
        kind="extra",
        run="b",
        rank=0,
        step=-1,
        event="AdamW::0.weight",
        event_kind="optimizer",
        phase="optimizer",
        call_site=f"{src / 'train.py'}:10",
        writes_state=True,
        order=0.5,
    )
    arms, said = extra_call_arms(case, [script])
    assert arms == [] and "no patch can reach" in said[0]


def test_an_extra_init_step_is_proven_by_suppressing_it_on_b(tmp_path):
    case = _case(tmp_path)
    ledger = Ledger(case.workspace)
    result = run_workflow(case, ledger, RunOptions(timeout_s=120, budget_minutes=10))
    st = ledger.state()
    v = result.verdict
    assert result.mismatch.step == 0
    assert v.classification.value == "bug", v
    hyp = st.hypotheses[v.hypothesis]
    assert hyp.category == "extra-call" and "helpers:prime" in hyp.statement
    assert "helpers.py:11 (prime)" in (v.location or "")
    rows = discriminator_rows(st)
    proof = next(r for r in rows if r.arm == hyp.id)
    assert proof.changed == "helpers:prime suppressed (returns None)"
    assert proof.applied_to == "b" and proof.outcome == "all 4 steps match"
    assert verdict_basis(st).kind == "intervention"

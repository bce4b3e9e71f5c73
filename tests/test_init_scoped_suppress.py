"""An extra call made during initialisation, into a function both runs also call in every
step, is tested by suppressing its initialisation calls alone, and placed at the line that
made it. A real small job: run B warms its update helper once before training (a decay of
every weight with nothing to learn from), and both runs call that helper after every step."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_workflow_support import extra_call, script_case

from triage_agent.errors import InputError
from triage_agent.interventions import describe, parse_intervention, to_text
from triage_agent.ledger import Ledger
from triage_agent.records import Case
from triage_agent.workflow.arms import try_arm
from triage_agent.workflow.structural import extra_call_arms

HELPERS = '''"""Weight upkeep."""

import torch


@torch.no_grad()
def shrink(params):
    for p in params:
        p.mul_(0.98)
'''

TRAIN = """import sys
import torch
from helpers import shrink
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
if "--warm" in sys.argv:
    shrink(list(model.parameters()))
x = torch.randn(16, 4)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(4):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        shrink(list(model.parameters()))
        log.log(step, loss=loss.detach())
"""
INIT_CALL = 10  # the line of TRAIN that calls shrink before training


def _case(tmp_path: Path) -> Case:
    return script_case(tmp_path, "init-call", "--warm", {"train.py": TRAIN, "helpers.py": HELPERS})


def _candidate(case: Case, step: int):
    src = Path(case.run_b.cwd)
    return extra_call(
        f"{src / 'helpers.py'}:9",
        step=step,
        event="<root>::aten::mul_.Tensor",
        event_kind="op",
        phase="forward",
        order=0.5,
    )


def test_an_extra_call_is_suppressed_only_in_the_phase_it_was_seen_in(tmp_path):
    case = _case(tmp_path)
    (at_init,), _ = extra_call_arms(case, [_candidate(case, -1)])
    in_step, _ = extra_call_arms(case, [_candidate(case, 2)])
    assert at_init.intervention == "suppress helpers:shrink@init"
    assert "during initialisation" in at_init.hypothesis.statement
    # in a step, a call that writes is first tested with what it is handed put back
    assert [a.intervention for a in in_step] == [
        "isolate-writes helpers:shrink",
        "suppress helpers:shrink",
    ]
    iv = parse_intervention(at_init.intervention)
    assert describe(iv) == "helpers:shrink suppressed before the first step (returns None)"
    assert parse_intervention(to_text(iv)) == iv
    with pytest.raises(InputError, match=r"\[@init\|@FILE:LINE\]"):
        parse_intervention("suppress helpers:shrink@step")


def test_suppressing_the_initialisation_call_alone_proves_it_and_names_its_line(tmp_path):
    case = _case(tmp_path)
    ledger = Ledger(case.workspace)
    (arm,), _ = extra_call_arms(case, [_candidate(case, -1)])
    ev = try_arm(case, ledger, arm, timeout_s=120)
    # every step's own call goes through: B then matches A on all four steps
    assert ev is not None and ev.result.value == "supported", ev and ev.summary
    src = Path(case.run_b.cwd)
    assert arm.location.startswith(f"{src / 'train.py'}:{INIT_CALL}, "), arm.location
    assert "helpers.py:9 (shrink)" in arm.location
    # the whole function suppressed drops the step calls too: that tests something else
    whole = arm.model_copy(update={"intervention": "suppress helpers:shrink"})
    whole.hypothesis = whole.hypothesis.model_copy(update={"id": "H-whole"})
    assert try_arm(case, ledger, whole, timeout_s=120).result.value == "refuted"

"""`outplace FILE:LINE`: the in-place torch calls one line of the job makes run out of place.

A job whose B run takes an in-place fast path (`--inplace`) that writes over a tensor a
shortcut still holds: the line's calls run out of place make every step of B match A, with
the flag kept; the same at another line changes nothing, and the report says the pin was
never reached there."""

from __future__ import annotations

import pytest
from test_workflow_support import flags_case

from triage_agent.errors import InputError
from triage_agent.interventions import intervene, parse_intervention, to_text
from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceResult

BLOCK = '''"""A residual block whose activation may run in place."""

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, width, inplace):
        super().__init__()
        self.fc, self.inplace = torch.nn.Linear(width, width), inplace

    def forward(self, x):
        shortcut = x
        h = F.relu(x, inplace=self.inplace)
        return shortcut + self.fc(h)
'''

TRAIN = """import argparse
import torch
from block import Block
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--inplace", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), Block(8, args.inplace), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(32, 8)
with MetricLog(args.out, rank=0) as log:
    for step in range(3):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def test_outplace_reads_back_and_refuses_a_bare_file():
    assert to_text(parse_intervention("outplace block.py:14")) == "outplace block.py:14"
    with pytest.raises(InputError, match="outplace FILE:LINE"):
        parse_intervention("outplace block.py")


def test_the_line_that_writes_in_place_is_the_one_whose_out_of_place_run_matches(tmp_path):
    case = flags_case(
        tmp_path, "inplace", {"train.py": TRAIN, "block.py": BLOCK}, [], ["--inplace"]
    )
    ledger = Ledger(case.workspace)
    right = intervene(case, "b", [parse_intervention("outplace block.py:14")], ledger=ledger)
    assert right.match.all_match, right.line
    assert right.outcome.patches["outplace block.py:14"]["called"] == 1
    wrong = intervene(case, "b", [parse_intervention("outplace block.py:15")], ledger=ledger)
    assert not wrong.match.all_match and wrong.result == EvidenceResult.observed
    assert "called" not in wrong.outcome.patches["outplace block.py:15"]

"""Activation checkpointing whose recomputation sees another state than its forward: the
``recompute-state`` policy reruns each recomputation under the forward's state, and the
workflow proposes it for a job that checkpoints and whose runs execute different events."""

from __future__ import annotations

from test_workflow_support import script_case, triage

from triage_agent.records import EvidenceResult

# A block whose forward advances a plain attribute it also reads: recomputed in backward
# (reentrant checkpointing), it reads the advanced value and rebuilds other activations.
PARTS = """import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Jitter(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.calls = 0

    def forward(self, h):
        self.calls = self.calls + 1
        scale = 1.0 + 0.01 * (self.calls % 3)
        return torch.tanh(self.lin(h) * scale)


class Net(nn.Module):
    def __init__(self, width, recompute):
        super().__init__()
        self.blocks = nn.ModuleList(Jitter(width) for _ in range(2))
        self.head = nn.Linear(width, 1)
        self.recompute = recompute

    def forward(self, h):
        for b in self.blocks:
            h = checkpoint(b, h, use_reentrant=True) if self.recompute else b(h)
        return self.head(h)
"""

TRAIN = """import sys

import torch

from parts import Net
from triage_agent.metrics import MetricLog

torch.manual_seed(3)
net = Net(8, recompute="--recompute" in sys.argv)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
log = MetricLog(sys.argv[1], rank=0)
for step in range(4):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(16, 8, generator=g, requires_grad=True)
    y = torch.randn(16, 1, generator=g)
    loss = (net(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach())
log.close()
"""


def test_a_recomputation_that_reads_what_its_forward_wrote_is_proven_at_the_write(tmp_path):
    case = script_case(tmp_path, "jitter", "--recompute", {"train.py": TRAIN, "parts.py": PARTS})
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    line = next(i for i, s in enumerate(PARTS.splitlines(), 1) if "self.calls = self.calls" in s)
    assert f"parts.py:{line} (writes calls in the forward" in (v.location or ""), v.location
    proofs = [
        e
        for e in st.evidence
        if e.kind == "rerun"
        and e.result == EvidenceResult.supported
        and "recompute-state" in (e.data.interventions or [])
    ]
    assert proofs, [e.summary for e in st.evidence if e.kind == "rerun"]

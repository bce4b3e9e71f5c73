"""A flag that selects one of two same-named methods of the job's own: B with A's method in
place of its own proves the difference is made inside B's, placed where the op streams first
part. Real processes through the whole workflow."""

from __future__ import annotations

from test_workflow_support import flags_case, triage

STEPS = """import torch


class Plain:
    def __init__(self, model, lr):
        self.model, self.lr = model, lr

    def update(self, x, y):
        loss = (self.model(x) - y).pow(2).mean()
        self.model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in self.model.parameters():
                p.sub_(self.lr * p.grad)
        return loss.detach()


class Chunked(Plain):
    def update(self, x, y):
        total = torch.zeros(())
        self.model.zero_grad()
        for xs, ys in zip(x.chunk(2), y.chunk(2)):
            total = total + (self.model(xs) - ys).pow(2).mean()
            total.backward(retain_graph=True)
        with torch.no_grad():
            for p in self.model.parameters():
                p.sub_(self.lr * p.grad / 2)
        return total.detach() / 2


IMPLS = {"plain": Plain, "chunked": Chunked}
"""

TRAIN = """import argparse

import torch

from steps import IMPLS
from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--impl", default="plain")
args = p.parse_args()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
step = IMPLS[args.impl](model, 0.05)
g = torch.Generator().manual_seed(1)
x, y = torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)
with MetricLog(args.out, rank=0) as log:
    for i in range(4):
        log.log(i, loss=step.update(x, y), w=model[0].weight.sum().detach())
"""


def test_a_flag_that_selects_a_same_named_method_is_placed_inside_it(tmp_path):
    case = flags_case(
        tmp_path, "chunked", {"steps.py": STEPS, "train.py": TRAIN}, [], ["--impl", "chunked"]
    )
    result, state = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    lines = STEPS.splitlines()
    first = next(i for i, s in enumerate(lines, 1) if "class Chunked" in s)
    last = next(i for i, s in enumerate(lines, 1) if "return total.detach()" in s)
    # written as the workflow's own directory sees it (here, an absolute path)
    where = (v.location or "").split(" ")[0]
    file, _, line = where.rpartition(":")
    assert file.endswith("src/steps.py") and first < int(line) <= last, v.location
    assert "Chunked.update" in v.location and "Plain.update" in v.statement
    swapped = [
        e
        for e in state.evidence
        if "replace steps:Chunked.update=steps:Plain.update" in str(e.argv)
        or "Chunked.update" in e.summary
    ]
    assert any(e.result.value == "supported" for e in swapped), [e.summary for e in swapped]

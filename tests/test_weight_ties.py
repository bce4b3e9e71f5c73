"""A weight one version of a model package shares and the next builds twice: the state at
initialisation pairs the names by their bytes (the port renamed them), ``tie-params`` on the
run that holds them apart makes every step match, and the place is the line that built the
copy. Real processes, the two versions on each run's PYTHONPATH."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_workflow_support import triage

from triage_agent.errors import InputError
from triage_agent.interventions import describe, parse_intervention
from triage_agent.records import Case, RunSpec

V1 = """import torch.nn as nn


class LM(nn.Module):
    def __init__(self, vocab=16, dim=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.body = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x):
        return self.head(self.body(self.embed(x)).tanh())
"""

# the port: modules renamed, the output projection a copy of the embedding's values
V2 = """import torch
import torch.nn as nn


class Output(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.proj = nn.Linear(table.weight.shape[1], table.weight.shape[0], bias=False)
        with torch.no_grad():
            self.proj.weight.copy_(table.weight)

    def forward(self, h):
        return self.proj(h)


class LM(nn.Module):
    def __init__(self, vocab=16, dim=8):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.out = Output(self.tokens)

    def forward(self, x):
        return self.out(self.mix(self.tokens(x)).tanh())
"""

TRAIN = """import sys

import torch
import torch.nn.functional as F

from lm import LM
from triage_agent.metrics import MetricLog

torch.manual_seed(3)
model = LM()
opt = torch.optim.AdamW(model.parameters(), lr=0.05)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(4):
        g = torch.Generator().manual_seed(step)
        x = torch.randint(0, 16, (8, 5), generator=g)
        loss = F.cross_entropy(model(x).flatten(0, 1), torch.roll(x, 1, 1).flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def _case(tmp_path: Path) -> Case:
    src = tmp_path / "src"
    for tree, text in (("v1", V1), ("v2", V2)):
        (src / tree).mkdir(parents=True)
        (src / tree / "lm.py").write_text(text)
    (src / "train.py").write_text(TRAIN)

    def run(name: str, tree: str) -> RunSpec:
        return RunSpec(
            name=name,
            metrics="{out}",
            cwd=str(src),
            env={"PYTHONPATH": tree},
            launch=[["{python}", "train.py", "{out}"]],
        )

    return Case(
        name="port-unties",
        workspace=str(tmp_path / "ws"),
        source_roots=[str(src)],
        run_a=run("a", "v1"),
        run_b=run("b", "v2"),
        timeout_s=120,
    )


def test_a_weight_the_port_copies_instead_of_sharing_is_tied_back_and_placed(tmp_path):
    result, state = triage(_case(tmp_path))
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    line = next(i for i, s in enumerate(V2.splitlines(), 1) if "self.proj = nn.Linear" in s)
    # the place is written as the workflow's own directory sees it (here, an absolute path)
    assert (v.location or "").split(" ")[0].endswith(f"src/v2/lm.py:{line}"), v.location
    assert "embed.weight and head.weight" in v.statement
    assert "out.proj.weight" in v.statement and "tokens.weight" in v.statement
    assert "builds out.proj.weight as a parameter of its own" in (v.location or "")
    tied = [e for e in state.evidence if "made one tensor" in e.summary]
    assert tied and tied[-1].result.value == "supported", [e.summary for e in tied]


def test_tie_params_is_parsed_and_refused_in_one_line():
    iv = parse_intervention("tie-params a.weight=b.weight;c.w=d.w=e.w")
    assert iv.groups == [["a.weight", "b.weight"], ["c.w", "d.w", "e.w"]]
    assert "a.weight and b.weight; c.w and d.w and e.w made one tensor" in describe(iv)
    for bad in ("tie-params a.weight", "tie-params a.weight=", "tie-params a b=c"):
        with pytest.raises(InputError, match="tie-params NAME=NAME"):
            parse_intervention(bad)

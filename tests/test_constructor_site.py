"""An extra object whose constructor draws (a module's initial weights): the place is the
job's line that constructs it, not the constructor, which draws as every module's does."""

from __future__ import annotations

from test_workflow_support import script_case, triage

BUILD = """import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, 4)


def build(width, with_tagger):
    extras = []
    if with_tagger:
        extras.append(Tagger(width))
    net = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 1))
    return net, extras
"""

TRAIN = """import sys

import torch

from build import build
from triage_agent.metrics import MetricLog

torch.manual_seed(12)
net, _ = build(8, "--tagger" in sys.argv)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
log = MetricLog(sys.argv[1], rank=0)
for step in range(3):
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g)
    loss = (net(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.detach())
log.close()
"""


def test_an_extra_module_built_from_the_training_stream_is_placed_where_it_is_built(tmp_path):
    case = script_case(tmp_path, "tagger", "--tagger", {"train.py": TRAIN, "build.py": BUILD})
    result, _ = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    line = next(i for i, s in enumerate(BUILD.splitlines(), 1) if "Tagger(width)" in s)
    assert (v.location or "").split(",")[0].endswith(f"build.py:{line}"), v.location
    assert "which constructs Tagger" in (v.location or "")

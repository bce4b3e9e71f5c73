"""A flag that selects one of two files of the job's own (``--impl v2`` imports step_v2.py
where A runs step_v1.py): the flag is proven, the trace shows each run calling into a file
the other never does, and the two files' hunks are bisected, B's flag kept, to the one
line that carries the difference; the helper the rewrite also added is not named."""

from __future__ import annotations

from test_workflow_support import flags_case, triage

TRAIN = """import argparse
import importlib

import torch

from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out")
p.add_argument("--impl", default="v1")
args = p.parse_args()
impl = importlib.import_module(f"step_{args.impl}")
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
with MetricLog(args.out, rank=0) as log:
    for step in range(4):
        log.log(step, loss=impl.train_step(net, opt, x, y))
"""

STEP_V1 = """def train_step(net, opt, x, y):
    opt.zero_grad()
    loss = (net(x) - y).pow(2).mean()
    loss.backward()
    opt.step()
    return loss.detach()
"""

STEP_V2 = '''"""The step, rewritten around a loss helper."""


def _loss(net, x, y):
    err = net(x) - y
    return err.pow(2).mean()


def train_step(net, opt, x, y):
    opt.zero_grad()
    loss = _loss(net, x[1:], y[1:])
    loss.backward()
    opt.step()
    return loss.detach()
'''

CHANGED = STEP_V2.splitlines().index("    loss = _loss(net, x[1:], y[1:])") + 1


def test_a_flag_that_selects_another_file_is_narrowed_to_the_line_that_carries_it(tmp_path):
    files = {"train.py": TRAIN, "step_v1.py": STEP_V1, "step_v2.py": STEP_V2}
    case = flags_case(tmp_path, "impl", files, [], ["--impl", "v2"])
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert (v.location or "").startswith(f"step_v2.py:{CHANGED} "), v.location
    flag = next(h for h in st.hypotheses.values() if "--impl" in h.statement)
    assert flag.status.value == "supported"
    assert f"step_v2.py:{CHANGED}" in flag.statement  # where the flag reaches training

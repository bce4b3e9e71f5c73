"""A checkpoint written inside the step it stands for: after the optimizer's update, before
the step's schedule and its weight average move on. The resumed process starts from a
schedule and an average one step behind; neither put back alone makes the steps match, both
together do, and the verdict names the line that writes the checkpoint there, in the
function that goes on with the step after it."""

from __future__ import annotations

from test_workflow_support import resume_case, triage

from triage_agent.ledger_view import verdict_basis

TRAIN = """import copy
import sys

import torch

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.manual_seed(1)
net = torch.nn.Linear(6, 1)
avg = copy.deepcopy(net).requires_grad_(False)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.8)
x = torch.randn(16, 6)


def checkpoint(step):
    state = {"net": net.state_dict(), "avg": avg.state_dict(), "opt": opt.state_dict()}
    torch.save({**state, "sched": sched.state_dict(), "step": step}, save)


def train_step(step):
    loss = net(x).pow(2).mean() + 0.1 * (net(x) - avg(x)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if save != "-" and step == last:
        checkpoint(step)
    sched.step()
    with torch.no_grad():
        for a, p in zip(avg.parameters(), net.parameters()):
            a.lerp_(p, 0.5)
    return loss.detach()


step, resumed = 0, None
if resume != "-":
    ck = torch.load(resume)
    net.load_state_dict(ck["net"])
    avg.load_state_dict(ck["avg"])
    opt.load_state_dict(ck["opt"])
    sched.load_state_dict(ck["sched"])
    resumed = ck["step"]
    step = resumed + 1
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    loss = train_step(step)
    log.log(step, loss=loss, lr=opt.param_groups[0]["lr"])
    step += 1
log.close()
"""

SAVE_CALL = TRAIN.splitlines().index("        checkpoint(step)") + 1


def test_a_checkpoint_written_inside_its_step_is_named_where_the_step_goes_on(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    case = resume_case(tmp_path, "inside", steps=5, save_at=2, source_roots=[str(tmp_path)])
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert f"train.py:{SAVE_CALL} (writes the checkpoint inside step 2" in (v.location or ""), (
        v.location
    )
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    ivs = proof.data.interventions
    assert len(ivs) >= 2 and ivs[0].startswith("restore-state "), ivs
    # each restore alone was tried first and left a step differing
    alone = [
        e
        for e in st.evidence
        if e.kind.value == "rerun"
        and len(e.data.interventions or []) == 1
        and e.data.interventions[0].startswith("restore-")
    ]
    assert len(alone) >= 2 and all(e.result.value == "refuted" for e in alone)

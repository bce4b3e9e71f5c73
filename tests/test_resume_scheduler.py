"""A resume that leaves the LR schedule where a fresh one starts: the state at the last equal
step shows the resumed run's scheduler behind, and carrying every scheduler's state across
the resume (restore-scheduler) proves it. A real small job with its own checkpoint code: it
saves the schedule and never loads it; its optimizer state brings back the rate of the first
resumed step, so the first differing loss comes two steps after the resume."""

from __future__ import annotations

from pathlib import Path

from test_workflow_support import resume_case, triage

from triage_agent.interventions import describe, parse_intervention

TRAIN = """import sys

import torch

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.manual_seed(1)
net = torch.nn.Linear(6, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1 / (1 + i))
x = torch.randn(8, 6)
step, resumed = 0, None
if resume != "-":
    ck = torch.load(resume)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    resumed = ck["step"]
    step = resumed + 1
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    loss = net(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    log.log(step, loss=loss.detach())
    step += 1
log.close()
if save != "-":
    ck = {"net": net.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}
    torch.save({**ck, "step": last}, save)
"""


def test_the_policy_reads_back_as_text():
    iv = parse_intervention("restore-scheduler")
    assert describe(iv).startswith("policy restore-scheduler (save every LR scheduler's state")


def test_a_schedule_the_resume_left_fresh_is_proven_by_carrying_it_across(tmp_path: Path):
    (tmp_path / "train.py").write_text(TRAIN)
    case = resume_case(
        tmp_path,
        "resume-scheduler",
        steps=6,
        save_at=2,
        source_roots=[str(tmp_path)],
        scan_paths=[str(tmp_path / "train.py")],
    )
    result, st = triage(case)
    assert result.mismatch.step == 5  # resumed after 2: steps 3 and 4 still agree
    v = result.verdict
    assert v.classification.value == "bug", v
    assert (v.location or "").startswith("state:scheduler"), v.location
    hyp = st.hypotheses[v.hypothesis]
    assert hyp.category == "scheduler-state" and "resumed" in hyp.statement
    proof = [e for e in st.evidence if e.id in v.evidence and e.kind.value == "rerun"]
    assert proof and proof[-1].result.value == "supported"
    assert proof[-1].data.interventions == ["restore-scheduler"]

"""`restore-state PART`: training state a resume did not bring back, put back from the process
that saved it, on jobs that are not corpus cases.

- A consistency loss against an EMA teacher, whose checkpoint code rebuilds the teacher from
  the student on resume: the whole workflow finds the teacher (a second top-level module)
  different where the resumed step starts, puts it back, every step matches, and the verdict
  names the job's line that loaded the teacher.
- The state capture keys optimizer state by parameter name as well: an optimizer rebuilt over
  the parameters in another order keeps its state_dict's bytes and moves the moments.
"""

from __future__ import annotations

import pytest
import torch
from test_workflow_support import resume_case, triage

from triage_agent.errors import InputError
from triage_agent.interventions import parse_intervention, to_text
from triage_agent.job_objects import by_param
from triage_agent.ledger_view import verdict_basis
from triage_agent.records import EvidenceResult

TEACHER = """import copy
import sys

import torch

from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.manual_seed(1)
net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
teacher = copy.deepcopy(net)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
x, y = torch.randn(16, 6), torch.randn(16, 1)
step, resumed = 0, None
if resume != "-":
    ck = torch.load(resume)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    teacher.load_state_dict(net.state_dict())
    resumed = ck["step"]
    step = resumed + 1
log = MetricLog(out, rank=0, resumed_from=resumed)
while step <= last:
    with torch.no_grad():
        target = teacher(x)
    loss = (net(x) - y).pow(2).mean() + (net(x) - target).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for t, s in zip(teacher.parameters(), net.parameters(), strict=True):
            t.mul_(0.9).add_(s, alpha=0.1)
    log.log(step, loss=loss.detach())
    if step == last and save != "-":
        torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "step": step}, save)
    step += 1
log.close()
"""


def test_restore_state_reads_back_and_refuses_an_unknown_part():
    assert to_text(parse_intervention("restore-state model1,optimizer")) == (
        "restore-state model1,optimizer"
    )
    with pytest.raises(InputError, match="restore-state PART"):
        parse_intervention("restore-state weights")


def test_optimizer_state_by_name_sees_moments_moved_to_other_parameters():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    opt = torch.optim.Adam(net.parameters())
    net(torch.randn(2, 4)).sum().backward()
    opt.step()
    saved = opt.state_dict()
    # rebuilt over the same parameters in another order, loaded by position
    params = list(net.parameters())
    moved = torch.optim.Adam([params[2], params[3], params[0], params[1]])
    moved.load_state_dict(saved)
    assert [
        torch.equal(a, b)
        for a, b in zip(
            [s["exp_avg"] for s in saved["state"].values()],
            [s["exp_avg"] for s in moved.state_dict()["state"].values()],
            strict=True,
        )
    ] == [True] * 4  # by position: the same bytes
    before, after = by_param([net], [opt]), by_param([net], [moved])
    assert not torch.equal(before["0.weight"]["exp_avg"], after["0.weight"]["exp_avg"])


def test_a_teacher_the_resume_rebuilds_is_put_back_and_its_load_named(tmp_path):
    (tmp_path / "train.py").write_text(TEACHER)
    case = resume_case(tmp_path, "teacher", steps=5, save_at=2, source_roots=[str(tmp_path)])
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 3
    assert v is not None and v.classification.value == "bug", v
    assert "train.py:19" in (v.location or ""), v.location  # teacher.load_state_dict(...)
    basis = verdict_basis(st)
    proof = next(e for e in st.evidence if e.id == basis.evidence)
    assert proof.data.interventions == ["restore-state model1"]
    assert proof.result == EvidenceResult.supported

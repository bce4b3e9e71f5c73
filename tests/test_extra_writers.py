"""A proven launch flag read through the training counters: the loop the flag selects steps
the LR scheduler a second time from its second step on. A write watch on the schedulers'
counters in both runs finds the call only run B makes; suppressing the scheduler's step where
that line calls it, with the flag left on, makes every step match, and the verdict names the
line. Also: the line-scoped suppression itself, which leaves every other caller alone."""

from __future__ import annotations

import pytest
from test_workflow_support import script_case, triage

from triage_agent.errors import InputError
from triage_agent.interventions import parse_intervention
from triage_agent.ledger_view import verdict_basis
from triage_agent.records import EvidenceResult
from triage_agent.workflow.extra_writers import extra_writers
from triage_agent.workflow.write_recorder import Frame, WatchReport, WriteRecord

TRAIN = """import sys

import torch

import loops
from triage_agent.metrics import MetricLog

out, legacy = sys.argv[1], "--legacy-loop" in sys.argv
torch.manual_seed(0)
net = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
x, y = torch.randn(16, 4), torch.randn(16, 1)
with MetricLog(out, rank=0) as log:
    (loops.legacy if legacy else loops.plain)(net, opt, sched, x, y, 5, log)
"""

LOOPS = """def _update(net, opt, x, y):
    loss = (net(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach()


def plain(net, opt, sched, x, y, steps, log):
    for step in range(steps):
        loss = _update(net, opt, x, y)
        sched.step()
        log.log(step, loss=loss, lr=opt.param_groups[0]["lr"])


def legacy(net, opt, sched, x, y, steps, log):
    for step in range(steps):
        loss = _update(net, opt, x, y)
        sched.step()
        if step >= 1:
            sched.step()  # the epoch-end call of the loop this one came from
        log.log(step, loss=loss, lr=opt.param_groups[0]["lr"])
"""


def test_a_flag_that_selects_a_loop_stepping_the_scheduler_twice_is_read_to_that_call(tmp_path):
    case = script_case(
        tmp_path, "stepped-twice", "--legacy-loop", {"train.py": TRAIN, "loops.py": LOOPS}
    )
    result, st = triage(case)
    v = result.verdict
    assert result.mismatch.step == 1  # the lr logged after step 1's extra call
    line = next(i for i, s in enumerate(LOOPS.splitlines(), 1) if "epoch-end call" in s)
    assert v is not None and v.classification.value == "bug", v
    assert (v.location or "").startswith(f"loops.py:{line}"), v.location
    proof = next(e for e in st.evidence if e.id == verdict_basis(st).evidence)
    assert proof.result == EvidenceResult.supported
    assert proof.data.interventions == [
        f"suppress torch.optim.lr_scheduler:LRScheduler.step@loops.py:{line}"
    ]


def test_a_suppression_scoped_to_a_line_parses_and_says_so():
    iv = parse_intervention("suppress torch.optim.lr_scheduler:LRScheduler.step@loops.py:21")
    assert iv.site == "loops.py:21" and iv.scope == "run"
    with pytest.raises(InputError, match=r"\[@init\|@FILE:LINE\]"):
        parse_intervention("suppress torch.optim.lr_scheduler:LRScheduler.step@loops.py")


def _writes(rank: int, writes: dict[tuple[str, str], int]) -> WatchReport:
    """A report of writes through ReduceLROnPlateau.step called from the job's loop.py:37."""
    lib = Frame(
        file="/site-packages/torch/optim/lr_scheduler.py",
        line=1,
        function="ReduceLROnPlateau.step",
        module="torch.optim.lr_scheduler",
    )
    job = Frame(file="/job/loop.py", line=37, function="fit", module="loop")
    return WatchReport(
        pid=1,
        rank=rank,
        writes=[
            WriteRecord(cls=cls, attr=attr, value="0.1", stack=[lib, job], count=n)
            for (cls, attr), n in writes.items()
        ],
    )


def test_a_write_a_call_both_runs_make_alike_decides_is_no_extra_call():
    # Both runs call the plateau scheduler every step (its position, written on each call,
    # counts 8 in each); only A's call lowers the rate once. That is a decision taken on
    # values that differ, not a call only A makes: no suppression is proposed for it.
    lr = ("torch.optim.optimizer:Optimizer", "param_groups[0].lr")
    pos = ("torch.optim.lr_scheduler:LRScheduler", "last_epoch")
    a, b = _writes(0, {lr: 1, pos: 8}), _writes(0, {pos: 8})
    decided: list = []
    assert extra_writers([a], [b], "/job", "/job", decided) == []
    step = "torch.optim.lr_scheduler:ReduceLROnPlateau.step"
    assert decided == [("a", f"{lr[0]}.{lr[1]}", step, 1, 0)]
    # the same rate write with the position written more often too: a call only A makes
    found = extra_writers([_writes(0, {lr: 1, pos: 9})], [b], "/job", "/job")
    assert {f[:2] for f in found} == {("a", f"{lr[0]}.{lr[1]}"), ("a", f"{pos[0]}.{pos[1]}")}


def test_a_line_that_steps_k_times_as_often_is_brought_to_the_other_runs_rate(tmp_path):
    # B steps the schedule once per micro-batch (4 per step) from one line, A once per step
    # from another; both construct it alike. The test for B's line is one call in four
    # let through, not every call suppressed (which would stop B's schedule altogether).
    import sys

    from triage_agent.interventions import parse_intervention, to_text
    from triage_agent.policies import FunctionPatch, _apply_patch

    pos = ("torch.optim.lr_scheduler:LRScheduler", "last_epoch")

    def report(rank: int, site_line: int, n: int) -> WatchReport:
        lib = Frame(
            file="/x/torch/optim/lr_scheduler.py",
            line=1,
            function="LRScheduler.step",
            module="torch.optim.lr_scheduler",
        )
        ctor = Frame(file="/job/trainer.py", line=9, function="Trainer.__init__", module="trainer")
        at = Frame(file="/job/trainer.py", line=site_line, function="Trainer.fit", module="trainer")
        return WatchReport(
            pid=1,
            rank=rank,
            writes=[
                WriteRecord(cls=pos[0], attr=pos[1], value="1", stack=[lib, ctor], count=1),
                WriteRecord(cls=pos[0], attr=pos[1], value="1", stack=[lib, at], count=n),
            ],
        )

    found = extra_writers([report(0, 30, 8)], [report(0, 54, 32)], "/job", "/job")
    assert [(f[0], f[3], f[6]) for f in found] == [("b", "trainer.py:54", 4)]
    iv = parse_intervention("thin torch.optim.lr_scheduler:LRScheduler.step@trainer.py:54=4")
    assert to_text(iv) == "thin torch.optim.lr_scheduler:LRScheduler.step@trainer.py:54=4"

    # the patch lets the K-th of every K calls through
    (tmp_path / "ticker.py").write_text("calls = []\n\ndef tick(i):\n    calls.append(i)\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import ticker

        _apply_patch(FunctionPatch(target="ticker:tick", every=3), str(tmp_path / "r.jsonl"))
        for i in range(1, 10):
            ticker.tick(i)
        assert ticker.calls == [3, 6, 9]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("ticker", None)

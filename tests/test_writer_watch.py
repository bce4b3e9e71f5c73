"""A run that dies where it reads state written wrongly earlier: the write watch names the
frame that wrote it, not the frame that noticed it, and only when a rerun proves it. A real
small plain-torch job, built here: views of each parameter's Adam moments are linked once,
after the first optimizer's step, while the later groups' optimizers have no state yet."""

from __future__ import annotations

from test_workflow_support import mode_job, mode_verdict

from triage_agent.records import EvidenceKind
from triage_agent.workflow.failure import Failure
from triage_agent.workflow.write_recorder import Frame, WatchTarget, WriteRecord
from triage_agent.workflow.writer_watch import implicated, module_of, origin_frame

STEPPER = """import torch


class MomentView:
    \"\"\"A read-only view of one parameter's Adam second moment.\"\"\"

    def __init__(self, param):
        self.param = param
        self.state = None

    def link(self, state):
        self.state = state

    def peak(self):
        if self.state is None or "exp_avg_sq" not in self.state:
            raise KeyError(f"exp_avg_sq not linked for a parameter of {tuple(self.param.shape)}")
        return self.state["exp_avg_sq"].max()


def relink(view, state):
    view.link(state)


class Stepper:
    \"\"\"Steps the groups jointly, or with one optimizer per group (less memory at a time).\"\"\"

    def __init__(self, groups, mode):
        def make(gs):
            return torch.optim.AdamW(gs, lr=0.01, foreach=False)

        self.opts = [make(groups)] if mode == "joint" else [make([g]) for g in groups]
        self.views = [MomentView(p) for g in groups for p in g["params"]]
        self.linked = False

    def step(self):
        for opt in self.opts:
            opt.step()
            self.link_views()

    def link_views(self):
        if self.linked:
            return
        for view in self.views:
            relink(view, self.state_of(view.param))
        self.linked = True

    def state_of(self, p):
        for opt in self.opts:
            if p in opt.state:
                return opt.state[p]
        return {}

    def peak(self):
        return max(v.peak() for v in self.views)
"""

TRAIN = mode_job(
    "from stepper import Stepper",
    "--step-mode",
    "joint",
    """model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
groups = [
    {"params": [q for q in model.parameters() if q.dim() > 1], "weight_decay": 0.1},
    {"params": [q for q in model.parameters() if q.dim() <= 1], "weight_decay": 0.0},
]
stepper = Stepper(groups, args.step_mode)
x = torch.randn(8, 4)
with MetricLog(args.out, rank=0) as log:
    for step in range(3):
        loss = model(x).pow(2).mean()
        model.zero_grad()
        loss.backward()
        stepper.step()
        log.log(step, loss=loss.detach(), v_peak=stepper.peak())
""",
)


def _line(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_the_watched_class_and_attribute_come_from_the_failing_method(tmp_path):
    src = tmp_path / "stepper.py"
    src.write_text(STEPPER)
    f = Failure(
        run="b",
        error="KeyError",
        file=str(src),
        line=_line(STEPPER, "raise KeyError"),
        function="MomentView.peak",
    )
    (t,) = implicated(f, [str(tmp_path)])
    assert (t.module, t.qualname) == ("stepper", "MomentView")
    assert t.attrs[0] == "state"  # the tested state first, then what the message reads
    assert module_of(str(src), ["/nowhere", str(tmp_path)]) == "stepper"


def test_the_write_is_followed_past_setters_and_pass_throughs(tmp_path):
    src = tmp_path / "stepper.py"
    src.write_text(STEPPER)

    def fr(needle: str, fn: str) -> Frame:
        return Frame(file=str(src), line=_line(STEPPER, needle), function=fn, module="stepper")

    write = WriteRecord(
        cls="stepper:MomentView",
        attr="state",
        value="dict with 0 keys []",
        stack=[
            fr("self.state = state", "MomentView.link"),
            fr("view.link(state)", "relink"),
            fr("relink(view, self.state_of", "Stepper.link_views"),
            fr("self.link_views()", "Stepper.step"),
        ],
    )
    target = WatchTarget(module="stepper", qualname="MomentView", attrs=["state"])
    got = origin_frame(write, target)
    assert got is not None and got.function == "Stepper.link_views", got


def test_a_crash_noticed_downstream_is_named_at_the_write_the_failure_read(tmp_path):
    files = {"stepper.py": STEPPER, "train.py": TRAIN}
    v, ledger = mode_verdict(tmp_path, "linked-early", files, "--step-mode", "joint", "per-group")
    assert v is not None and v.classification.value == "bug", v
    link = _line(STEPPER, "relink(view, self.state_of")
    assert (v.location or "").startswith(f"stepper.py:{link} (Stepper.link_views)"), v.location
    assert f"stepper.py:{_line(STEPPER, 'raise KeyError')}" not in (v.location or "")
    st = ledger.state()
    watch = [e for e in st.evidence if e.kind == EvidenceKind.manifest and e.id in v.evidence]
    assert watch and "dict with 0 keys" in watch[0].summary, [e.summary for e in watch]
    proof = [e for e in st.evidence if e.id in v.evidence and e.kind == EvidenceKind.rerun]
    assert proof and proof[0].result.value == "supported"

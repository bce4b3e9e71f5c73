"""A crash of one run whose declared setting carries it: proven by the setting, a defect,
and named at the failing line only when that line made the failing value itself. A real
small job, built here, and the rule on small sources."""

from __future__ import annotations

from test_workflow_support import mode_job, mode_verdict

from triage_agent.records import EvidenceKind
from triage_agent.workflow.crash import made_here
from triage_agent.workflow.failure import Failure

REDUCE = """import torch


def grouped_norm(grads, mode):
    chosen = [g.norm() for g in grads if mode == "all" or g.dim() > 2]
    return torch.stack(chosen).norm()


class Table:
    def __init__(self):
        self.rows = {}

    def get(self, key):
        if key in self.rows:
            return self.rows[key]
        raise KeyError(f"{key} not found in table")


def scale(values, k):
    return torch.stack(values) * k


def from_object(obj):
    return torch.stack(obj.parts)
"""

TRAIN = mode_job(
    "from reduce import grouped_norm",
    "--norm-mode",
    "all",
    """model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
with MetricLog(args.out, rank=0) as log:
    for step in range(3):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        norm = grouped_norm([p.grad for p in model.parameters()], args.norm_mode)
        opt.step()
        log.log(step, loss=loss.detach(), grad_norm=norm)
""",
)


def _line(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_the_failing_line_is_named_only_when_it_made_the_failing_value(tmp_path):
    src = tmp_path / "reduce.py"
    src.write_text(REDUCE)

    def at(needle: str, fn: str) -> str | None:
        return made_here(
            Failure(run="b", error="x", file=str(src), line=_line(REDUCE, needle), function=fn)
        )

    assert "chosen" in (at("torch.stack(chosen)", "grouped_norm") or "")
    assert at('raise KeyError(f"{key}', "Table.get") is None  # a check: state made elsewhere
    assert at("torch.stack(values)", "scale") is None  # a parameter: made by the caller
    assert at("torch.stack(obj.parts)", "from_object") is None  # an object's state


def test_a_crash_carried_by_a_flag_is_a_defect_at_the_line_that_made_the_value(tmp_path):
    files = {"reduce.py": REDUCE, "train.py": TRAIN}
    v, ledger = mode_verdict(tmp_path, "crash-by-flag", files, "--norm-mode", "all", "high-rank")
    assert v is not None and v.classification.value == "bug", v
    assert f"reduce.py:{_line(REDUCE, 'torch.stack(chosen)')} (grouped_norm)" in (v.location or "")
    assert "--norm-mode" in (v.location or "")
    reruns = [e for e in ledger.state().evidence if e.kind == EvidenceKind.rerun]
    assert any(e.id in v.evidence and e.result.value == "supported" for e in reruns)

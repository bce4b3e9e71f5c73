"""Synthetic zero gradients assigned so that a following step can initialise state."""

import re

from ..facts import func_text
from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_ZEROS = re.compile(r"\b(zeros|zeros_like|new_zeros|empty|empty_like|new_empty)\(")


def _check(m: Match) -> Hit | None:
    rhs = m.text("rhs")
    f = m.unit.enclosing_function(m.anchor)
    if f is None:
        return None
    if not _ZEROS.search(rhs):
        ident = re.match(r"^[A-Za-z_]\w*", rhs)
        body = func_text(m.unit, f)
        if not ident or not re.search(
            rf"\b{re.escape(ident.group(0))}\s*=\s*[^\n]*{_ZEROS.pattern}", body
        ):
            return None
    steps = [
        g.qualname
        for g in m.unit.reachable(f, depth=2)
        if any(name == "step" for name, _ in m.unit.calls_of(g))
    ]
    if not steps:
        return None
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note=f"zero gradients assigned in `{f.qualname}`; a step follows in `{steps[0]}`.",
    )


PROBE = Probe(
    id="optinit-zero-grad-step",
    category=Category.optimizer_init,
    severity="high",
    title="synthetic zero-gradient step",
    rationale=(
        "Zero gradients are installed so that a step can create optimizer state. Adam with "
        "zero gradients still increments its step and applies decoupled weight decay, so the "
        "weights and bias correction move before training starts."
    ),
    template="optimizer_init",
    params={"dtype": "bf16", "optimizer": "adamw"},
    query=(
        '(assignment left: (attribute attribute: (identifier) @g (#eq? @g "grad")) '
        "right: (_) @rhs) @anchor"
    ),
    predicate=_check,
    references=["https://github.com/deepspeedai/DeepSpeed/issues/8910"],
)

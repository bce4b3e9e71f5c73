"""In-place accumulation into a gradient buffer (``+=`` / ``add_``), and in which dtype."""

import re

from ..facts import is_grad_text
from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_NUMBER = re.compile(r"^\s*[-+]?\d+(\.\d*)?\s*$")
_ACCUM_FUNC = re.compile(
    r"accum|backward|hook|reduce|allreduce|average|bucket|copy_grads|_grad", re.I
)


def _check(m: Match) -> Hit | None:
    lhs = m.text("lhs")
    rhs = m.text("rhs")
    if not is_grad_text(lhs) or _NUMBER.match(rhs) or re.search(r"\b(len|sum)\(", rhs):
        return None
    f = m.unit.enclosing_function(m.anchor)
    if f is None or not _ACCUM_FUNC.search(f.name):
        return None
    cast = re.search(r"\.(float|half|bfloat16|double)\(\)|\.to\(", rhs)
    note = f"`{lhs}` accumulates in place in `{f.qualname}`"
    note += "; the addend is cast first, so the sum's dtype is the buffer's." if cast else "."
    return Hit(Unit.line(m.anchor), Unit.end_line(m.anchor), note=note, confidence=0.7)


PROBE = Probe(
    id="accum-grad-inplace",
    category=Category.accumulation,
    severity="low",
    title="in-place accumulation into a gradient buffer",
    rationale=(
        "Gradient accumulation order and dtype decide the low bits at a GAS boundary: "
        "accumulating micro-batches into a 16-bit buffer, or in a different order than the "
        "reference, changes the bits the optimizer consumes."
    ),
    template="reduction_order",
    params={"dtype": "float32"},
    query=(
        '(augmented_assignment left: (_) @lhs operator: "+=" right: (_) @rhs) @anchor\n'
        '(call function: (attribute object: (_) @lhs attribute: (identifier) @m (#eq? @m "add_")) '
        "arguments: (argument_list . (_) @rhs)) @anchor"
    ),
    predicate=_check,
)

"""``.half()`` / ``.bfloat16()`` / ``.to(low_dtype)`` applied to a gradient."""

import re

from ..facts import LOWP_DTYPE, is_grad_text, lowp_name
from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _check(m: Match) -> Hit | None:
    obj = m.text("obj")
    if not is_grad_text(obj):
        return None
    method = m.text("m")
    if method in ("to", "type") and not re.search(
        LOWP_DTYPE + r"|HalfTensor|BFloat16Tensor", m.text("args")
    ):
        return None
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note=f"`{obj}` is narrowed with `.{method}(...)`.",
        params={"low_dtype": lowp_name(m.text("anchor"))},
    )


PROBE = Probe(
    id="casts-grad-lowp",
    category=Category.casts,
    severity="medium",
    title="gradient narrowed to 16 bits",
    rationale=(
        "Narrowing a gradient discards the low bits the reference may still hold at that "
        "boundary; whether it is a bug or a policy depends on where the reference casts."
    ),
    template="cast_roundtrip",
    params={"low_dtype": "bfloat16"},
    query=(
        "(call function: (attribute object: (_) @obj attribute: (identifier) @m "
        '(#any-of? @m "half" "bfloat16" "to" "type")) arguments: (argument_list) @args) @anchor'
    ),
    predicate=_check,
)

"""A reduction performed in a 16-bit dtype: ``sum(dtype=fp16)`` or a collective on a cast."""

import re

from ..facts import COLLECTIVES, DOWNCAST_RE, LOWP_DTYPE, any_of, lowp_name
from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_REDUCERS = frozenset({"sum", "mean", "cumsum", "norm", "nansum", "matmul", "bmm", "mm", "einsum"})


def _check(m: Match) -> Hit | None:
    fn = m.text("fn")
    if m.caps.get("dt"):
        if fn not in _REDUCERS or not re.search(LOWP_DTYPE, m.text("dt")):
            return None
        note = f"`{fn}` accumulates in `{m.text('dt')}`."
    else:
        if fn not in COLLECTIVES or not DOWNCAST_RE.search(m.text("arg")):
            return None
        note = f"`{fn}` reduces `{m.text('arg')}`, a 16-bit copy."
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note=note,
        params={"low_dtype": lowp_name(m.text("anchor"))},
    )


PROBE = Probe(
    id="casts-lowp-reduction",
    category=Category.casts,
    severity="high",
    title="reduction in a lower dtype than the accumulation",
    rationale=(
        "Summing in 16 bits rounds every partial sum; a reference that reduces in fp32 and "
        "rounds once differs in the low bits, and the difference depends on reduction order."
    ),
    template="cast_roundtrip",
    params={"low_dtype": "bfloat16"},
    query=(
        "(call function: [(identifier) @fn (attribute attribute: (identifier) @fn)] "
        + any_of("fn", _REDUCERS)
        + ' arguments: (argument_list (keyword_argument name: (identifier) @k (#eq? @k "dtype") value: (_) @dt))) @anchor\n'
        "(call function: [(identifier) @fn (attribute attribute: (identifier) @fn)] "
        + any_of("fn", COLLECTIVES)
        + " arguments: (argument_list . (call) @arg)) @anchor"
    ),
    predicate=_check,
)

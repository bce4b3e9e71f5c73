"""Downcast -> collective -> upcast round trip inside one function (DeepSpeed #8913's class)."""

from ..facts import COLLECTIVES, DOWNCAST_RE, UPCAST_RE, any_of, lines_of, lowp_name
from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _check(m: Match) -> Hit | None:
    if m.text("fn") not in COLLECTIVES:
        return None
    f = m.unit.enclosing_function(m.anchor)
    if f is None:
        return None
    at = Unit.line(m.anchor)
    down = [(n, s) for n, s in lines_of(m.unit, f) if n <= at and DOWNCAST_RE.search(s)]
    up = [(n, s) for n, s in lines_of(m.unit, f) if n > at and UPCAST_RE.search(s)]
    if not down or not up:
        return None
    dn, ds = down[-1]
    un, _ = up[0]
    return Hit(
        at,
        Unit.end_line(m.anchor),
        note=f"downcast at line {dn}, `{m.text('fn')}` at line {at}, back up at line {un}.",
        params={"low_dtype": lowp_name(ds)},
    )


PROBE = Probe(
    id="casts-roundtrip-collective",
    category=Category.casts,
    severity="high",
    title="downcast -> collective -> upcast round trip",
    rationale=(
        "Values are rounded to 16 bits for the collective and widened again afterwards: the "
        "fp32 bits below bf16/fp16 precision are lost before fp32 accumulation, and a "
        "reference that reduces in fp32 keeps them."
    ),
    template="cast_roundtrip",
    params={"low_dtype": "bfloat16"},
    query=(
        "(call function: [(identifier) @fn (attribute attribute: (identifier) @fn)] "
        + any_of("fn", COLLECTIVES)
        + ") @anchor"
    ),
    predicate=_check,
    references=["https://github.com/deepspeedai/DeepSpeed/issues/8913"],
)

"""Division by GAS or world size before or after the reduction in the same function."""

import re

from ..facts import collective_lines
from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_DIVISOR = re.compile(
    r"world_size|gradient_accumulation_steps|accumulation_steps|\bgas\b|dp_size|data_parallel_size|"
    r"predivide|postscale|num_micro_?batches|micro_batches",
    re.I,
)


def _check(m: Match) -> Hit | None:
    divisor = m.text("div")
    if not _DIVISOR.search(divisor):
        return None
    f = m.unit.enclosing_function(m.anchor)
    if f is None:
        return None
    colls = collective_lines(m.unit, f)
    if not colls:
        return None
    at = Unit.line(m.anchor)
    when = "before" if at < min(colls) else "after" if at > max(colls) else "between"
    return Hit(
        at,
        Unit.end_line(m.anchor),
        note=f"divides by `{divisor}` {when} the collective(s) at line(s) {', '.join(map(str, colls[:3]))}.",
    )


PROBE = Probe(
    id="accum-divide-around-reduce",
    category=Category.accumulation,
    severity="medium",
    title="division by GAS / world size around a reduction",
    rationale=(
        "Dividing before the reduction (pre-divide) and after it give different roundings; "
        "both are valid policies, but a run and its reference must make the same choice."
    ),
    template="reduction_order",
    params={"world_size": 2, "backend": "gloo"},
    query=(
        '(call function: (attribute attribute: (identifier) @m (#any-of? @m "div_" "div" "mul_")) '
        "arguments: (argument_list . (_) @div)) @anchor\n"
        '(augmented_assignment operator: ["/=" "*="] right: (_) @div) @anchor\n'
        '(binary_operator operator: "/" right: (_) @div) @anchor'
    ),
    predicate=_check,
)

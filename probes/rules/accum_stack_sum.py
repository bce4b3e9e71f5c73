"""``torch.stack(xs).sum()`` (a tree reduction) where a reference may sum sequentially."""

from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _check(m: Match) -> Hit | None:
    f = m.unit.enclosing_function(m.anchor)
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note=f"stacked sum in `{f.qualname if f else '<module>'}`.",
    )


PROBE = Probe(
    id="accum-stack-sum",
    category=Category.accumulation,
    severity="low",
    title="stacked sum instead of sequential accumulation",
    rationale=(
        "`torch.stack(xs).sum()` reduces with the kernel's own (vectorised, blocked) order; "
        "`for x in xs: acc += x` adds left to right. The results differ in the last bits, so "
        "two frameworks that pick different forms disagree."
    ),
    template=None,
    query=(
        "(call function: (attribute object: (call function: (attribute attribute: (identifier) @s "
        '(#eq? @s "stack"))) attribute: (identifier) @m (#eq? @m "sum"))) @anchor\n'
        '(call function: (attribute attribute: (identifier) @m (#eq? @m "sum")) '
        'arguments: (argument_list . (call function: (attribute attribute: (identifier) @s (#eq? @s "stack"))))) @anchor'
    ),
    predicate=_check,
)

"""``atomicAdd`` in C++/CUDA kernels (floating-point accumulation in arrival order)."""

import re

from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_INT_ARG = re.compile(
    r"\(\s*\(?\s*(unsigned\s+)?(int|long|uint\d+_t|int\d+_t|size_t)\b|counter|count|idx|index", re.I
)


def _check(m: Match) -> Hit | None:
    args = m.text("args")
    if _INT_ARG.search(args):
        return None  # integer counters are exact in any order
    f = m.unit.enclosing_function(m.anchor)
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note=f"`{m.text('fn')}` in `{f.qualname if f else '<file>'}`.",
        confidence=0.8,
    )


PROBE = Probe(
    id="nondet-atomicadd-cpp",
    category=Category.nondeterminism,
    severity="medium",
    title="atomicAdd in a C++/CUDA kernel",
    rationale=(
        "Floating-point atomicAdd sums in whatever order threads arrive; the result's low bits "
        "vary run to run. Integer counters are exact and are not reported."
    ),
    template=None,
    lang="cpp",
    query=(
        "(call_expression function: [(identifier) @fn (qualified_identifier name: (identifier) @fn)] "
        '(#any-of? @fn "atomicAdd" "atomicAdd_block" "atomicAdd_system" "unsafeAtomicAdd" '
        '"fastAtomicAdd" "gpuAtomicAdd" "atomic_add") arguments: (argument_list) @args) @anchor'
    ),
    predicate=_check,
)

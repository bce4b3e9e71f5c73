"""``xs[0]`` or ``torch.stack(xs)`` on a possibly empty per-rank list, then a collective.

The DeepSpeed #8912 class: after replica deduplication one rank's list of norm
contributions is legitimately empty; that rank raises and its peers hang in the collective.
"""

import re

from ..facts import collective_lines, func_text
from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _from_param(name: str, params: list[str], body: str) -> str | None:
    if name in params:
        return name
    if not re.search(rf"\b{re.escape(name)}\s*=\s*\[", body):
        return None
    # xs = [... for ... in P ...] | xs = [] ... for ... in P: ... xs.append(...)
    for p in params:
        q = re.escape(p)
        n = re.escape(name)
        if re.search(rf"\b{n}\s*=\s*\[[^\n]*\bfor\b[^\n]*\bin\s+{q}\b", body):
            return p
        if re.search(rf"\b{n}\s*=\s*\[\s*\]", body) and re.search(
            rf"for\s+[^\n]*\bin\s+{q}\b[^\n]*:(?:\n[^\n]*){{0,6}}\b{n}\.append\(", body
        ):
            return p
    return None


def _guarded(names: set[str], before: str) -> bool:
    for n in map(re.escape, names):
        if re.search(
            rf"len\(\s*{n}\s*\)|\bnot\s+{n}\b|\bif\s+{n}\s*:|\b{n}\s*==\s*\[\]|\bassert\s+{n}\b",
            before,
        ):
            return True
    return False


def _check(m: Match) -> Hit | None:
    f = m.unit.enclosing_function(m.anchor)
    if f is None:
        return None
    at = Unit.line(m.anchor)
    later = [c for c in collective_lines(m.unit, f) if c > at]
    if not later:
        return None
    name = m.text("x")
    source = _from_param(name, f.params, func_text(m.unit, f))
    if source is None:
        return None
    before = "\n".join(m.unit.lines[f.start_line - 1 : at - 1])
    if _guarded({name, source}, before):
        return None
    return Hit(
        at,
        Unit.end_line(m.anchor),
        note=(
            f"`{m.text('anchor')}` fails when `{source}` is empty on a rank; the collective at "
            f"line {later[0]} then waits for that rank forever."
        ),
        params={"function": f.qualname},
    )


PROBE = Probe(
    id="coll-empty-list-before-collective",
    category=Category.collectives,
    severity="high",
    title="unguarded [0] / stack on a list that can be empty on one rank",
    rationale=(
        "Lists filtered per rank (deduplicated replicas, expert-only parameters) can be empty "
        "on some ranks; indexing or stacking them raises there while the other ranks block in "
        "the collective that follows: one rank crashes, its peers hang."
    ),
    template="empty_contribution",
    params={"world_size": 2},
    query=(
        '(subscript value: (identifier) @x subscript: (integer) @i (#eq? @i "0")) @anchor\n'
        '(call function: (attribute attribute: (identifier) @m (#any-of? @m "stack" "cat")) '
        "arguments: (argument_list . (identifier) @x)) @anchor"
    ),
    predicate=_check,
    references=["https://github.com/deepspeedai/DeepSpeed/issues/8912"],
)

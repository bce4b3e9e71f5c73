"""A collective launched with ``async_op=True`` whose handle is never waited on in scope."""

import re

from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _escapes(name: str, text: str) -> bool:
    n = re.escape(name)
    return bool(
        re.search(rf"\b{n}\s*\.\s*(wait|synchronize|is_completed)\s*\(", text)
        or re.search(rf"\b(return|yield)\b[^\n]*\b{n}\b", text)
        or re.search(rf"\.(append|extend|add|put|insert)\([^\n]*\b{n}\b", text)
        or re.search(rf"=\s*[^\n=]*\b{n}\b", text)  # stored elsewhere (attribute, dict, tuple)
        or re.search(rf"\w\([^\n]*\b{n}\b", text)  # handed to a helper that may wait
    )


def _check(m: Match) -> Hit | None:
    parent = m.anchor.parent
    fn = m.text("fn")
    at = Unit.line(m.anchor)
    if parent is not None and parent.type == "expression_statement":
        return Hit(at, Unit.end_line(m.anchor), note=f"the handle of `{fn}` is discarded.")
    if parent is None or parent.type != "assignment":
        return None  # returned, appended or passed on directly: someone else owns the wait
    left = parent.child_by_field_name("left")
    if left is None or left.type != "identifier":
        return None
    name = m.unit.text(left)
    f = m.unit.enclosing_function(m.anchor)
    scope = m.unit.lines[Unit.end_line(parent) : f.end_line if f else len(m.unit.lines)]
    if _escapes(name, "\n".join(scope)):
        return None
    return Hit(at, Unit.end_line(m.anchor), note=f"handle `{name}` of `{fn}` is never waited on.")


PROBE = Probe(
    id="coll-async-no-wait",
    category=Category.collectives,
    severity="high",
    title="async collective without wait()",
    rationale=(
        "Without wait() on the work handle, the destination is read (or its storage reused) "
        "before the collective completes; the result depends on timing, so two runs differ "
        "only sometimes, and a synchronising tracer hides it."
    ),
    template="async_lifetime",
    params={"device": "cuda"},
    query=(
        "(call function: [(identifier) @fn (attribute attribute: (identifier) @fn)] "
        'arguments: (argument_list (keyword_argument name: (identifier) @k (#eq? @k "async_op") '
        "value: (true)))) @anchor"
    ),
    predicate=_check,
)

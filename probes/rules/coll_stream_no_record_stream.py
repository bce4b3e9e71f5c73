"""Work issued on a side stream with no ``record_stream`` for the tensors it touches."""

import re

from ..facts import COLLECTIVES
from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_WORK = re.compile(r"\b(" + "|".join(sorted(COLLECTIVES)) + r"|copy_|non_blocking\s*=\s*True)\b")


def _check(m: Match) -> Hit | None:
    body = m.anchor.child_by_field_name("body")
    if body is None or not _WORK.search(m.unit.text(body)):
        return None
    f = m.unit.enclosing_function(m.anchor)
    scope = m.unit.text(f.node) if f else m.unit.text(m.unit.root)
    if "record_stream" in scope:
        return None
    return Hit(
        Unit.line(m.anchor),
        Unit.line(body),
        note=f"`{m.text('ctx')}` runs tensor work on another stream; nothing calls record_stream.",
    )


PROBE = Probe(
    id="coll-stream-no-record-stream",
    category=Category.collectives,
    severity="medium",
    title="side-stream work without record_stream",
    rationale=(
        "The caching allocator tracks a tensor against the stream that allocated it; used on "
        "another stream without record_stream, its memory can be reused while that stream still "
        "reads or writes it: an allocator-reuse race that synchronised runs do not show."
    ),
    template="async_lifetime",
    params={"device": "cuda"},
    query=(
        "(with_statement (with_clause (with_item value: (call function: (attribute attribute: "
        '(identifier) @m (#eq? @m "stream"))) @ctx))) @anchor'
    ),
    predicate=_check,
)

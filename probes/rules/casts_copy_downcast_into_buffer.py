"""``buf.copy_(x.to(low_dtype))`` into a gradient/reduction buffer."""

import re

from ..facts import DOWNCAST_RE, lowp_name
from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_BUFFERY = re.compile(r"grad|accum|reduc|buffer|bucket|partition|flat", re.I)


def _check(m: Match) -> Hit | None:
    arg = m.text("arg")
    if not DOWNCAST_RE.search(arg):
        return None
    f = m.unit.enclosing_function(m.anchor)
    context = m.text("dst") + " " + arg + " " + (f.name if f else "")
    if not _BUFFERY.search(context):
        return None
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note=f"`{m.text('dst')}` receives a 16-bit copy.",
        params={"low_dtype": lowp_name(arg)},
    )


PROBE = Probe(
    id="casts-copy-downcast-into-buffer",
    category=Category.casts,
    severity="medium",
    title="16-bit copy into a gradient or reduction buffer",
    rationale=(
        "A buffer filled with a downcast copy carries only 16-bit values; if it is later "
        "accumulated or reduced in fp32, the rounding happened before the accumulation, "
        "which a reference that keeps fp32 throughout does not do."
    ),
    template="cast_roundtrip",
    params={"low_dtype": "bfloat16"},
    query=(
        '(call function: (attribute object: (_) @dst attribute: (identifier) @m (#eq? @m "copy_")) '
        "arguments: (argument_list . (call) @arg)) @anchor"
    ),
    predicate=_check,
)

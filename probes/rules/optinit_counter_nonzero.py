"""A step counter initialised to a non-zero value."""

import re

from ..facts import STEP_NAME_RE, is_init_name
from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _name(text: str) -> str:
    key = re.search(r"\[\s*['\"](\w+)['\"]\s*\]$", text)
    if key:
        return key.group(1)
    return text.rsplit(".", 1)[-1]


def _check(m: Match) -> Hit | None:
    target = m.text("lhs")
    name = _name(target.strip("'\""))
    if not STEP_NAME_RE.match(name):
        return None
    value = m.text("val")
    if m.caps.get("val") and m.caps["val"][0].type == "call":
        lit = re.search(r"tensor\(\s*\[?\s*(\d+)", value)
        if not lit:
            return None
        value = lit.group(1)
    try:
        if int(value, 0) == 0:
            return None
    except ValueError:
        return None
    f = m.unit.enclosing_function(m.anchor)
    is_key = "[" in target or m.anchor.type == "pair"
    if not is_key and not (f is not None and is_init_name(f.name)):
        return None
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note=f"`{name}` starts at {value}.",
    )


PROBE = Probe(
    id="optinit-counter-nonzero",
    category=Category.optimizer_init,
    severity="medium",
    title="step counter initialised non-zero",
    rationale=(
        "Adam's bias correction is 1 - beta**step: a counter that starts at 1 (or is restored "
        "off by one) changes the first update's scale in the last bits, and a reference that "
        "starts at 0 diverges from step one."
    ),
    template="optimizer_init",
    params={"optimizer": "adamw"},
    query=(
        "(assignment left: [(identifier) (attribute) (subscript)] @lhs right: [(integer) (call)] @val) @anchor\n"
        "(pair key: (string) @lhs value: (integer) @val) @anchor"
    ),
    predicate=_check,
)

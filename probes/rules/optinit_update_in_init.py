"""A step counter advanced, or weight decay applied, on a path reached from initialisation."""

import re

from ..facts import STEP_NAME_RE, init_reach
from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_DECAY = re.compile(r"weight_decay|\bwd\b|decay")


def _check(m: Match) -> Hit | None:
    if m.anchor.type == "augmented_assignment":
        target = m.text("lhs")
        key = re.search(r"['\"](\w+)['\"]\s*\]$", target)
        name = key.group(1) if key else target.rsplit(".", 1)[-1]
        if not STEP_NAME_RE.match(name):
            return None
        what = f"`{target}` advances"
    else:
        if not _DECAY.search(m.text("args")):
            return None
        what = "weight decay is applied"
    f = m.unit.enclosing_function(m.anchor)
    root = init_reach(m.unit).get(id(f)) if f is not None else None
    if f is None or root is None:
        return None
    note = f"{what} in `{f.qualname}`, reached from `{root}`."
    return Hit(Unit.line(m.anchor), Unit.end_line(m.anchor), note=note)


PROBE = Probe(
    id="optinit-update-in-init",
    category=Category.optimizer_init,
    severity="high",
    title="step-like update reachable from initialisation",
    rationale=(
        "A counter increment or weight-decay application on the construction path changes "
        "optimizer state before the first training step; the run is then one update ahead "
        "of a reference that initialises lazily."
    ),
    template="optimizer_init",
    params={"optimizer": "adamw"},
    query=(
        '(augmented_assignment left: (_) @lhs operator: "+=") @anchor\n'
        '(call function: (attribute attribute: (identifier) @m (#any-of? @m "mul_" "add_" "sub_")) '
        "arguments: (argument_list) @args) @anchor"
    ),
    predicate=_check,
    references=["https://github.com/deepspeedai/DeepSpeed/issues/8910"],
)

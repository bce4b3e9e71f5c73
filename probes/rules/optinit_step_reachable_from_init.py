"""An optimizer ``step()`` reachable from initialisation (DeepSpeed #8910's class)."""

import re

from ..facts import init_reach, is_init_name
from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_NOT_OPTIMIZER = re.compile(r"sched|profil|timer|pbar|progress|writer|monitor|tqdm|bar\b", re.I)


def _check(m: Match) -> Hit | None:
    obj = m.text("obj")
    if _NOT_OPTIMIZER.search(obj):
        return None
    f = m.unit.enclosing_function(m.anchor)
    if f is None:
        return None
    root = f.qualname if is_init_name(f.name) else init_reach(m.unit).get(id(f))
    if root is None:
        return None
    how = "inside" if root == f.qualname else f"reached from `{root}` through"
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note=f"`{obj}.step()` runs {how} `{f.qualname}`.",
        confidence=1.0 if re.search(r"optim", obj, re.I) else 0.6,
    )


PROBE = Probe(
    id="optinit-step-reachable-from-init",
    category=Category.optimizer_init,
    severity="high",
    title="optimizer step reachable from initialisation",
    rationale=(
        "An optimizer step taken while building the optimizer (to materialise its state) "
        "advances Adam's step counter and applies weight decay before training: the first "
        "real update then differs from a run whose optimizer starts clean."
    ),
    template="optimizer_init",
    params={"dtype": "bf16", "optimizer": "adamw"},
    query='(call function: (attribute object: (_) @obj attribute: (identifier) @m (#eq? @m "step"))) @anchor',
    predicate=_check,
    references=["https://github.com/deepspeedai/DeepSpeed/issues/8910"],
)

"""Autotuning: ``@triton.autotune`` or ``torch.compile(mode="max-autotune")``."""

from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _check(m: Match) -> Hit | None:
    if m.anchor.type == "decorator":
        if "autotune" not in m.text("d").rsplit(".", 1)[-1]:
            return None
        note = "kernel configuration chosen by timing."
    else:
        if "autotune" not in m.text("mode"):
            return None
        note = f"compiled with mode {m.text('mode')}."
    return Hit(Unit.line(m.anchor), Unit.end_line(m.anchor), note=note)


PROBE = Probe(
    id="nondet-autotune",
    category=Category.nondeterminism,
    severity="medium",
    title="autotuned kernel configuration",
    rationale=(
        "Autotuning picks the fastest configuration by timing, which varies with load; block "
        "sizes and split-K change the reduction order, so two runs can pick different bits."
    ),
    template=None,
    query=(
        "(decorator [(call function: (_) @d) (attribute) @d (identifier) @d]) @anchor\n"
        '(call arguments: (argument_list (keyword_argument name: (identifier) @k (#eq? @k "mode") '
        "value: (string) @mode))) @anchor"
    ),
    predicate=_check,
)

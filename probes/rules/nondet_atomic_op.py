"""Ops whose CUDA kernels accumulate with atomics: index_add_, scatter_add_, index_put_(accumulate=True)."""

import re

from ..model import Category, Hit, Match, Probe
from ..unit import Unit

_ALWAYS = frozenset(
    {"index_add_", "index_add", "scatter_add_", "scatter_add", "index_reduce_", "bincount"}
)
_IF_ACCUMULATE = frozenset({"index_put_", "index_put", "put_"})
_IF_REDUCE = frozenset({"scatter_reduce", "scatter_reduce_", "scatter_", "scatter"})


def _check(m: Match) -> Hit | None:
    op = m.text("m")
    args = m.text("args")
    if re.match(r"(np|numpy)\.", m.text("anchor")):
        return None  # NumPy runs on the host, sequentially
    if op in _IF_ACCUMULATE and not re.search(r"accumulate\s*=\s*True", args):
        return None
    if op in _IF_REDUCE and not re.search(r"reduce\s*=\s*['\"](sum|add|mean)['\"]", args):
        return None
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note=f"`{op}` accumulates with atomics on CUDA.",
        params={"op": op.rstrip("_") if op not in ("put_",) else op},
    )


PROBE = Probe(
    id="nondet-atomic-op",
    category=Category.nondeterminism,
    severity="high",
    title="atomic-accumulating op",
    rationale=(
        "On CUDA these ops add colliding indices with atomicAdd in arrival order, so floating "
        "point results vary run to run unless deterministic algorithms are enforced."
    ),
    template="op_repeatability",
    params={"device": "cuda", "repeats": 10, "deterministic": False},
    query=(
        "(call function: (attribute attribute: (identifier) @m "
        "(#any-of? @m "
        + " ".join(f'"{n}"' for n in sorted(_ALWAYS | _IF_ACCUMULATE | _IF_REDUCE))
        + ")) arguments: (argument_list) @args) @anchor"
    ),
    predicate=_check,
)

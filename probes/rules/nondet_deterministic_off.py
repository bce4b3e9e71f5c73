"""``use_deterministic_algorithms(False)`` or ``cudnn.deterministic = False``."""

from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _check(m: Match) -> Hit | None:
    if m.caps.get("o") and not m.text("o").endswith("cudnn"):
        return None
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note="deterministic algorithms are switched off.",
    )


PROBE = Probe(
    id="nondet-deterministic-off",
    category=Category.nondeterminism,
    severity="high",
    title="deterministic algorithms switched off",
    rationale=(
        "Switching determinism off (often after a run set it on) re-enables atomic-add "
        "kernels and nondeterministic cuDNN/cuBLAS algorithms for everything that follows."
    ),
    template="op_repeatability",
    params={"device": "cuda", "deterministic": False},
    query=(
        "(call function: [(identifier) @f (attribute attribute: (identifier) @f)] "
        '(#eq? @f "use_deterministic_algorithms") arguments: (argument_list . (false))) @anchor\n'
        '(assignment left: (attribute object: (_) @o attribute: (identifier) @a (#eq? @a "deterministic")) '
        "right: (false)) @anchor"
    ),
    predicate=_check,
)

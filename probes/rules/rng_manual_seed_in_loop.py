"""``manual_seed`` (or ``random.seed``/``np.random.seed``) called inside a loop."""

from ..facts import enclosing_loop
from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _check(m: Match) -> Hit | None:
    loop = enclosing_loop(m.anchor)
    if loop is None:
        return None
    obj = m.text("obj")
    if m.text("m") == "seed" and not obj.endswith("random"):
        return None
    return Hit(
        Unit.line(m.anchor),
        Unit.end_line(m.anchor),
        note=f"reseeds on every iteration of the loop at line {Unit.line(loop)}.",
    )


PROBE = Probe(
    id="rng-manual-seed-in-loop",
    category=Category.rng_state,
    severity="medium",
    title="RNG reseeded inside a loop",
    rationale=(
        "Reseeding per iteration ties the random stream to the loop counter: a resumed run whose "
        "counter restarts, or a repeat with different iteration counts, draws different numbers."
    ),
    template=None,
    query=(
        "(call function: (attribute object: (_) @obj attribute: (identifier) @m "
        '(#any-of? @m "manual_seed" "manual_seed_all" "seed" "set_seed" "model_parallel_cuda_manual_seed"))) @anchor'
    ),
    predicate=_check,
)

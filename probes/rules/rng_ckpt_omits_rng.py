"""A checkpoint save or load path that never touches any RNG stream."""

from ..model import Category, Hit, Match, Probe
from ._ckpt import RNG_TOUCH, checkpoint_entry


def _check(m: Match) -> Hit | None:
    f = m.unit.enclosing_function(m.anchor.child_by_field_name("name"))
    if f is None or f.node != m.anchor:
        return None
    path = checkpoint_entry(m.unit, f)
    if path is None or RNG_TOUCH.search(path.text):
        return None
    via = ", ".join(g.qualname for g in path.closure[1:4])
    return Hit(
        f.start_line,
        f.end_line,
        note=(
            f"`{f.qualname}` {path.kind}s a checkpoint"
            + (f" (via {via})" if via else "")
            + " and touches no RNG state: python, numpy, torch CPU, CUDA or model-parallel tracker."
        ),
        params={"zero_stage": 0},
        # public entry points first: a private helper is usually reached through one
        confidence=0.85 if f.name.startswith("_") else 1.0,
    )


PROBE = Probe(
    id="rng-ckpt-omits-rng",
    category=Category.rng_state,
    severity="high",
    title="checkpoint save/load omits RNG state",
    rationale=(
        "A resumed run restores weights and optimizer state but draws fresh random numbers "
        "(dropout masks, data shuffling): the first step after resume differs from the "
        "uninterrupted run unless every RNG stream is saved and restored."
    ),
    template="rng_resume",
    params={"zero_stage": 0},
    query='(function_definition name: (identifier) @n (#match? @n "(?i)(checkpoint|ckpt|resume)")) @anchor',
    predicate=_check,
)

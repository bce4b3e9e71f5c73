"""A checkpoint save path that records no data-loader/sampler position."""

from ..model import Category, Hit, Match, Probe
from ._ckpt import DATA_TOUCH, checkpoint_entry


def _check(m: Match) -> Hit | None:
    f = m.unit.enclosing_function(m.anchor.child_by_field_name("name"))
    if f is None or f.node != m.anchor:
        return None
    path = checkpoint_entry(m.unit, f)
    if path is None or path.kind != "save" or DATA_TOUCH.search(path.text):
        return None
    return Hit(
        f.start_line,
        f.end_line,
        note=f"`{f.qualname}` saves a checkpoint without a sampler or consumed-samples cursor.",
        confidence=0.6,
    )


PROBE = Probe(
    id="rng-ckpt-omits-data-cursor",
    category=Category.rng_state,
    severity="medium",
    title="checkpoint omits the data-loader cursor",
    rationale=(
        "Without the consumed-sample cursor (or sampler state) a resumed run replays or "
        "skips batches; the first step after resume sees different data than the reference."
    ),
    template=None,
    query='(function_definition name: (identifier) @n (#match? @n "(?i)(checkpoint|ckpt)")) @anchor',
    predicate=_check,
)

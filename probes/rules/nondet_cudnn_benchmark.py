"""``torch.backends.cudnn.benchmark = True``: autotuned convolution algorithms."""

from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _check(m: Match) -> Hit | None:
    if not m.text("o").endswith("cudnn"):
        return None
    return Hit(Unit.line(m.anchor), Unit.end_line(m.anchor), note="cuDNN benchmark mode is on.")


PROBE = Probe(
    id="nondet-cudnn-benchmark",
    category=Category.nondeterminism,
    severity="high",
    title="cudnn.benchmark = True",
    rationale=(
        "Benchmark mode times candidate algorithms at the first call of each shape and keeps "
        "the fastest; the choice (and its summation order) can differ between runs and hosts."
    ),
    template="op_repeatability",
    params={"op": "conv2d", "device": "cuda", "deterministic": False},
    query=(
        '(assignment left: (attribute object: (_) @o attribute: (identifier) @a (#eq? @a "benchmark")) '
        "right: (true)) @anchor"
    ),
    predicate=_check,
)

"""``ReduceOp.AVG`` where a reference may SUM then divide."""

from ..model import Category, Hit, Match, Probe
from ..unit import Unit


def _check(m: Match) -> Hit | None:
    if not m.text("o").endswith("ReduceOp"):
        return None
    return Hit(Unit.line(m.anchor), Unit.end_line(m.anchor), note="reduces with AVG.")


PROBE = Probe(
    id="coll-reduceop-avg",
    category=Category.collectives,
    severity="low",
    title="ReduceOp.AVG instead of SUM then divide",
    rationale=(
        "NCCL's AVG divides inside the reduction (per element, in the reduction dtype); SUM "
        "then divide rounds the full sum once. Same value mathematically, different bits."
    ),
    template="reduction_order",
    params={"world_size": 2},
    query='(attribute object: (_) @o attribute: (identifier) @a (#eq? @a "AVG")) @anchor',
    predicate=_check,
)

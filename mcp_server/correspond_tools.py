"""``compare_boundaries``: two frameworks' boundary captures, paired and compared.

A thin adapter over :func:`triage_agent.correspond.boundaries.build_table`, the function
behind ``triage correspond compare``. The caller names two capture directories inside the
allowed roots (each with its ``side.json``); nothing is launched. The table and a summary
of the mapping come back, and the comparison is recorded as manifest evidence with result
``observed``: state compared at step boundaries narrows, it does not by itself support a
hypothesis.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from triage_agent.correspond.boundaries import build_table
from triage_agent.correspond.model import CompatTable, Mapping, Unmapped
from triage_agent.correspond.table import verdict_line
from triage_agent.evidence_data import ManifestData
from triage_agent.records import Evidence, EvidenceKind, EvidenceResult

from .security import MAX_LIST_ITEMS, MAX_PATH_CHARS, Workspace
from .spec import In, Progress


class CompareBoundariesIn(In):
    a_dir: str = Field(max_length=MAX_PATH_CHARS, description="side A's capture directory")
    b_dir: str = Field(max_length=MAX_PATH_CHARS, description="side B's capture directory")
    hypotheses: list[str] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS, description="hypotheses this bears on"
    )


class PairName(BaseModel):
    a: str
    b: str
    why: str = Field(description="the evidence that settled the pair")


class MappingSummary(BaseModel):
    a_framework: str
    b_framework: str
    normalisation: list[str]
    pairs_total: int
    pairs: list[PairName] = Field(description=f"the first {MAX_LIST_ITEMS} pairs")
    unmapped_a: list[Unmapped] = Field(description="A's tensors with no partner, with why")
    unmapped_b: list[Unmapped] = Field(description="B's tensors with no partner, with why")


class CompareBoundariesOut(BaseModel):
    table: CompatTable
    verdicts: list[str] = Field(description="one line per boundary: match, or differs (policy)")
    mapping: MappingSummary
    evidence_id: str


def _summary(m: Mapping) -> MappingSummary:
    return MappingSummary(
        a_framework=m.a_framework,
        b_framework=m.b_framework,
        normalisation=m.normalisation,
        pairs_total=len(m.pairs),
        pairs=[PairName(a=p.a, b=p.b, why=p.evidence[-1]) for p in m.pairs[:MAX_LIST_ITEMS]],
        unmapped_a=[u for u in m.unmapped if u.side == "a"][:MAX_LIST_ITEMS],
        unmapped_b=[u for u in m.unmapped if u.side == "b"][:MAX_LIST_ITEMS],
    )


def _last_matching_step(t: CompatTable) -> int | None:
    if t.first is None:
        return t.steps - 1 if t.steps else None
    return t.first.step - 1 if t.first.step > 0 else None


def compare_boundaries(
    ws: Workspace, args: CompareBoundariesIn, progress: Progress
) -> CompareBoundariesOut:
    """Pair the parameters of two boundary captures (Megatron or DeepSpeed, dumped by
    triage_agent.correspond.capture) by init bytes, shape and normalised name, compare them
    bit for bit per step at each boundary (outputs, grads, moments, counters, master
    weights), and return the compatibility table: per boundary match or differs from step N,
    with the policy the evidence names (an optimizer setting per tensor, a gradient scale).
    Tensors with no partner are listed, never dropped. Recorded as manifest evidence."""
    ws.require_hypotheses(args.hypotheses)
    dirs = [ws.tree(d, must_exist=True) for d in (args.a_dir, args.b_dir)]
    progress(0, 1, "pairing and comparing the captures")
    table, mapping = build_table(*dirs)
    lines = [verdict_line(table, r.boundary) for r in table.rows]
    first = (
        [f"first difference: {table.policy.name}: {table.policy.detail}"] if table.policy else []
    )
    differences = [verdict_line(table, r.boundary) for r in table.rows if r.verdict != "match"]
    ev = ws.ledger.add_evidence(
        Evidence(
            hypotheses=args.hypotheses,
            kind=EvidenceKind.manifest,
            result=EvidenceResult.observed,
            summary=f"boundaries compared over {table.steps} steps, {table.pairs} pairs, "
            f"{table.unmapped} unmapped: " + "; ".join(lines + first),
            data=ManifestData(
                after_step=_last_matching_step(table),
                differences=differences + first,
                diffs=[r.model_dump(mode="json") for r in table.rows],
                records={"a": ws.rel(dirs[0]), "b": ws.rel(dirs[1])},
            ),
            artifacts=[
                ws.ledger.artifact(Path(d) / "side.json", f"side {s}")
                for s, d in zip("ab", dirs, strict=True)
            ],
        )
    )
    progress(1, 1, "compared")
    return CompareBoundariesOut(
        table=table, verdicts=lines + first, mapping=_summary(mapping), evidence_id=ev.id
    )

"""``compare_boundaries``: two frameworks' boundary captures, paired and compared.

A thin adapter over :func:`triage_agent.correspond.boundaries.build_table`, the function
behind ``triage correspond compare``, and with ``align`` over
:func:`triage_agent.correspond.workflow.align_case`, the one behind ``triage correspond
case``. Without ``align`` the caller names two capture directories inside the allowed roots
(each with its ``side.json``) and nothing is launched; with it the open case's A and B are
run (B with the given interventions) and each differing boundary's policy is proven by
rerunning B with one intervention from B's own configuration surface, every attempt rerun
evidence. The table and a summary of the mapping come back, and the comparison is recorded
as manifest evidence with result ``observed``: state compared at step boundaries narrows,
it does not by itself support a hypothesis.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from triage_agent.correspond.align import MAX_MINUTES, MAX_RERUNS, Budget
from triage_agent.correspond.boundaries import build_table
from triage_agent.correspond.model import Alignment, CompatTable, Mapping, Unmapped
from triage_agent.correspond.table import align_line, verdict_line
from triage_agent.correspond.workflow import align_case
from triage_agent.errors import InputError
from triage_agent.evidence_data import ManifestData
from triage_agent.interventions import check_untrusted, parse_intervention, to_text
from triage_agent.records import Evidence, EvidenceKind, EvidenceResult

from .security import MAX_LIST_ITEMS, MAX_PATH_CHARS, Workspace, cap_text
from .spec import In, Progress


class CompareBoundariesIn(In):
    a_dir: str | None = Field(
        default=None, max_length=MAX_PATH_CHARS, description="side A's capture directory"
    )
    b_dir: str | None = Field(
        default=None, max_length=MAX_PATH_CHARS, description="side B's capture directory"
    )
    hypotheses: list[str] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS, description="hypotheses this bears on"
    )
    align: bool = Field(
        default=False,
        description="run the open case's A and B instead of naming directories, and prove "
        "each differing boundary's policy by rerunning B with one intervention",
    )
    interventions: list[str] = Field(
        default_factory=list,
        max_length=MAX_LIST_ITEMS,
        description="with align: interventions B is launched with before the loop",
    )
    max_reruns: int = Field(default=MAX_RERUNS, ge=0, le=50, description="with align")
    max_minutes: float = Field(default=MAX_MINUTES, gt=0, le=240, description="with align")


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
    table: CompatTable = Field(description="the comparison (with align: as launched)")
    verdicts: list[str] = Field(description="one line per boundary: match, or differs (policy)")
    mapping: MappingSummary
    evidence_id: str
    alignment: Alignment | None = Field(
        default=None, description="with align: per boundary the proving intervention or unproven"
    )


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
    Tensors with no partner are listed, never dropped. Recorded as manifest evidence.
    With align (and no directories): runs the open case's A and B, then for each first
    differing boundary reruns B with candidates from B's own configuration surface (DeepSpeed
    config keys known to govern the policy, B's launch-flag choices, replacements of DeepSpeed
    calls), keeps the first after which that boundary matches, and repeats; the alignment
    gives per boundary the proving intervention or 'unproven', every attempt rerun evidence."""
    ws.require_hypotheses(args.hypotheses)
    alignment = None
    if args.align:
        if args.a_dir or args.b_dir:
            raise InputError("align runs the open case's own A and B: name no directories")
        case = ws.require_launch()
        given = [to_text(check_untrusted(parse_intervention(t))) for t in args.interventions]
        ws.output_dir("runs")
        ws.output_dir("interventions")
        progress(0, None, "running A and B, then aligning B boundary by boundary")
        res = align_case(
            case,
            ws.ledger.workspace,
            given,
            budget=Budget(reruns=args.max_reruns, minutes=args.max_minutes),
            progress=lambda m: progress(0, None, cap_text(m, 500)),
        )
        alignment, mapping, table = res.alignment, res.mapping, res.alignment.launched
        dirs = [ws.tree(d, must_exist=True) for d in (res.a_dir, res.b_dir)]
    elif args.a_dir is None or args.b_dir is None:
        raise InputError("name both capture directories (a_dir, b_dir), or set align")
    else:
        dirs = [ws.tree(d, must_exist=True) for d in (args.a_dir, args.b_dir)]
        progress(0, 1, "pairing and comparing the captures")
        table, mapping = build_table(*dirs)
    lines = (
        [align_line(alignment, r) for r in alignment.rows]
        if alignment
        else [verdict_line(table, r.boundary) for r in table.rows]
    )
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
        table=table,
        verdicts=lines + first,
        mapping=_summary(mapping),
        evidence_id=ev.id,
        alignment=alignment,
    )

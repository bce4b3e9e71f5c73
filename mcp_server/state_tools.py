"""The state manifests the workflow captured, compared: what a run or a checkpoint holds and
what the other lacks, recorded as manifest evidence a verdict can cite."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from triage_agent.evidence_data import ManifestData
from triage_agent.records import Evidence, EvidenceKind, EvidenceResult
from triage_agent.state_compare import StateComparison, compare_state

from .security import MAX_LIST_ITEMS, Workspace
from .spec import In, Progress


class CompareStateIn(In):
    point: str = Field(
        min_length=3,
        max_length=32,
        pattern=r"^(init|(after|step|end)-\d+)$",
        description="the boundary: init, after-K (step K reported, or a process resumed from "
        "K), step-K (the first forward of step K) or end-K (a process's end, or its checkpoint "
        "write, when its last step is K)",
    )
    rank: int = Field(default=0, ge=0, le=1_000_000)
    between: Literal["runs", "resume"] = Field(
        default="runs",
        description="runs: A's record against B's; resume: within `run`, the saving process "
        "(its end-K, else after-K) against the process that resumed from step K",
    )
    run: Literal["a", "b"] = Field(default="b", description="the run whose resume is compared")
    limit: int = Field(default=30, ge=1, le=MAX_LIST_ITEMS)
    hypotheses: list[str] = Field(
        default_factory=list,
        max_length=MAX_LIST_ITEMS,
        description="hypothesis ids the comparison bears on",
    )


class CompareStateOut(BaseModel):
    evidence_id: str = Field(description="the manifest evidence recorded")
    comparison: StateComparison


def compare_state_tool(ws: Workspace, args: CompareStateIn, progress: Progress) -> CompareStateOut:
    """Diff two state manifests the workflow captured (the baselines' state capture): run A
    against run B at one step boundary, or, with between=resume, what the process that
    resumed from step K rebuilt against what the saving process held (a checkpoint's round
    trip). Says the differing tensors, scalars, RNG streams, cursors and settings by section,
    and what only one side holds; recorded as manifest evidence."""
    ws.require_hypotheses(args.hypotheses)
    cmp = compare_state(
        ws.ledger.workspace,
        args.point,
        rank=args.rank,
        between=args.between,
        run=args.run,
        limit=args.limit,
    )
    said = (
        f"{cmp.a.run.upper()} {cmp.a.point} (pid {cmp.a.pid}) against {cmp.b.run.upper()} "
        f"{cmp.b.point} (pid {cmp.b.pid}), rank {args.rank}: "
    )
    if cmp.equal:
        said += f"equal over {cmp.compared} entries"
    else:
        parts = ", ".join(f"{n} {s}" for s, n in sorted(cmp.by_section.items()))
        said += f"{cmp.differing} of {cmp.compared} differ ({parts})"
        if cmp.only_in_a or cmp.only_in_b:
            said += (
                f"; {len(cmp.only_in_a)} only in the first, {len(cmp.only_in_b)} only in the second"
            )
    ev = ws.ledger.add_evidence(
        Evidence(
            hypotheses=args.hypotheses,
            kind=EvidenceKind.manifest,
            result=EvidenceResult.observed,
            summary=f"state compared: {said}",
            data=ManifestData(
                differences=[f"{e.section} {e.path}: {e.reason}" for e in cmp.differences],
                records={"first": ws.rel(cmp.a.file), "second": ws.rel(cmp.b.file)},
            ),
        )
    )
    progress(1, 1, said)
    return CompareStateOut(evidence_id=ev.id, comparison=cmp)

"""Stage-2 comparison: align two traced runs, record what differs, show the first divergence.

Traces are read only inside the allowed roots. Events without a counterpart are never
hidden: every rank reports ``unmatched_total`` and lists the first ones (capped for the
reply). A comparison is recorded as trace-compare evidence with result ``observed``: a
trace diff narrows, it does not by itself support a hypothesis.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from triage_agent.compare import ByteReport, CompareResult, headline, to_markdown
from triage_agent.compare import confirm_bytes as compare_bytes
from triage_agent.compare.distributed import Executor, compare_paths
from triage_agent.compare.result import Candidate, CrossRank, Divergence, Widen
from triage_agent.errors import InputError
from triage_agent.evidence_data import ByteCompareData, TraceCompareData
from triage_agent.ledger import sha256_file
from triage_agent.records import Evidence, EvidenceKind, EvidenceResult
from triage_agent.workflow.structural import with_patch_targets

from .security import MAX_LIST_ITEMS, MAX_PATH_CHARS, Workspace, cap_text
from .spec import In, Progress

MAX_UNMATCHED_SHOWN = 50
# A reply an assistant reads whole: the first candidates of each rank, counted by kind, and
# the full comparison as a resource (a list of twenty candidates one by one is ~30 KB).
MAX_CANDIDATES_SHOWN = 5
COMPARE_RESOURCE = "triage://compare/{evidence_id}"


class TracePairIn(In):
    trace_a: str = Field(max_length=MAX_PATH_CHARS, description="run A's trace file or directory")
    trace_b: str = Field(max_length=MAX_PATH_CHARS, description="run B's trace file or directory")
    mapping: str | None = Field(
        default=None,
        max_length=MAX_PATH_CHARS,
        description="correspondence map (scopes/names of A -> B); default: the case's",
    )
    ranks: list[int] | None = Field(default=None, max_length=1024, description="None: all")
    # the library's executor fields (defaults, descriptions), a tool call held to fewer workers
    workers: Annotated[int, Field(le=256)] = Executor.model_fields["workers"]
    ray: str | None = Executor.model_fields["ray"]


class CompareIn(TracePairIn):
    hypotheses: list[str] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS, description="hypotheses this bears on"
    )


class CompareOut(BaseModel):
    evidence_id: str = Field(description="the trace-compare evidence to cite")
    candidates_by_kind: dict[str, int] = Field(
        description="the first-divergence candidates of every rank counted by kind and event "
        "kind (for example 'extra op': 12), before the reply's cap"
    )
    full_result: str = Field(
        description="resource URI of the whole comparison (every candidate and unmatched event)"
    )
    result: CompareResult = Field(
        description=f"per-rank alignment; candidates listed up to {MAX_CANDIDATES_SHOWN} and "
        f"unmatched events up to {MAX_UNMATCHED_SHOWN} per rank (candidates_total and "
        "unmatched_total count them all; full_result holds them)"
    )


def _trace_files(path: Path) -> list[Path]:
    return sorted(path.glob("trace_rank*.jsonl")) if path.is_dir() else [path]


def _compare(
    ws: Workspace, args: TracePairIn, progress: Progress
) -> tuple[CompareResult, Path, Path]:
    pa = ws.tree(args.trace_a)
    pb = ws.tree(args.trace_b)
    mapping = args.mapping
    if mapping is None and ws.case is not None:
        mapping = ws.case.correspondence_map
    mapping_path = ws.path(mapping, must_exist=True) if mapping else None
    res = compare_paths(
        pa,
        pb,
        mapping=mapping_path,
        ranks=args.ranks,
        executor=Executor(workers=args.workers, ray=args.ray),
        progress=lambda done, total: progress(done, total, f"compared {done} of {total} ranks"),
    )
    ranks = [
        r.model_copy(update={"candidates": with_patch_targets(ws.case, r.candidates)})
        for r in res.ranks
    ]
    return res.model_copy(update={"ranks": ranks}), pa, pb


def compare_traces(ws: Workspace, args: CompareIn, progress: Progress) -> CompareOut:
    """Align two traced runs rank by rank on run-independent keys and find each rank's first
    divergence: inputs equal and outputs different is a candidate origin; different inputs
    make a receiver; events with no counterpart are reported, never skipped. Recorded as
    trace-compare evidence (observed: a trace diff supports nothing by itself)."""
    ws.require_hypotheses(args.hypotheses)
    progress(0, 1, "aligning traces")
    res, pa, pb = _compare(ws, args, progress)
    summary = headline(res)
    full = _write_full(ws, res)
    ev = ws.ledger.add_evidence(
        Evidence(
            hypotheses=args.hypotheses,
            kind=EvidenceKind.trace_compare,
            result=EvidenceResult.observed,
            summary=summary,
            data=TraceCompareData(
                status=res.status,
                complete=res.complete,
                summary=res.summary.model_dump(mode="json"),
                origins=[r.origin.model_dump(mode="json") for r in res.ranks if r.origin],
                candidates=[
                    c.model_dump(mode="json")
                    for r in res.ranks
                    for c in r.candidates[:MAX_UNMATCHED_SHOWN]
                ],
            ),
            artifacts=[
                ws.ledger.artifact(f, role=f"trace-{side}")
                for side, p in (("a", pa), ("b", pb))
                for f in _trace_files(p)
            ]
            + [ws.ledger.artifact(full, role=COMPARE_ROLE)],
        )
    )
    progress(1, 1, summary)
    ranks = [
        r.model_copy(
            update={
                "unmatched": r.unmatched[:MAX_UNMATCHED_SHOWN],
                "candidates": r.candidates[:MAX_CANDIDATES_SHOWN],
                "candidates_total": max(r.candidates_total, len(r.candidates)),
            }
        )
        for r in res.ranks
    ]
    return CompareOut(
        evidence_id=ev.id,
        candidates_by_kind=candidates_by_kind(res),
        full_result=COMPARE_RESOURCE.format(evidence_id=ev.id),
        result=res.model_copy(update={"ranks": ranks}),
    )


COMPARE_ROLE = "compare-result"


def candidates_by_kind(res: CompareResult) -> dict[str, int]:
    counts = Counter(f"{c.kind} {c.event_kind}" for r in res.ranks for c in r.candidates)
    return dict(counts.most_common())


def _write_full(ws: Workspace, res: CompareResult) -> Path:
    """The whole comparison, content-addressed, so the evidence can carry it as an artifact
    before the ledger has named the evidence."""
    text = res.model_dump_json(indent=1)
    out = ws.ledger.workspace / "compare" / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.is_file():
        out.write_text(text)
    return out


def full_result(ws: Workspace, evidence_id: str) -> str:
    """The whole comparison a compare_traces call recorded, read back through its evidence."""
    ev = next((e for e in ws.ledger.state().evidence if e.id == evidence_id), None)
    if ev is None or ev.kind is not EvidenceKind.trace_compare:
        raise InputError(f"no trace-compare evidence {evidence_id!r}: call compare_traces first")
    art = next((a for a in ev.artifacts if a.role == COMPARE_ROLE), None)
    if art is None:
        raise InputError(f"evidence {evidence_id} was recorded without its full comparison")
    path = ws.ledger.workspace / art.path
    if not path.is_file() or sha256_file(path) != art.sha256:
        raise InputError(f"the comparison file of {evidence_id} is missing or changed: {art.path}")
    return path.read_text()


class RankDivergence(BaseModel):
    rank: int
    status: str
    origin: Divergence | None = Field(description="first event whose inputs match, outputs differ")
    first_divergence: Divergence | None = Field(description="first differing event of any role")
    candidates: list[Candidate] = Field(
        description="first-divergence candidates in execution order: events one run executes "
        "and the other does not (with call site, the function it came from as an intervention "
        "names it, and whether they write state), then the origin"
    )
    first_receiver: Divergence | None = Field(
        description="the first event whose inputs differ, with the producer of each differing "
        "input in both runs: walk upstream from it"
    )
    outside_scope: Widen | None = Field(description="what to capture next when no origin was seen")
    unmatched_total: int
    notes: list[str]


class FirstDivergenceOut(BaseModel):
    status: str
    complete: bool
    ranks: list[RankDivergence]
    cross_rank: CrossRank
    warnings: list[str]
    markdown: str


def first_divergence(ws: Workspace, args: TracePairIn, progress: Progress) -> FirstDivergenceOut:
    """Show, per rank, the first divergence between two traced runs: the candidate origin
    (inputs equal, outputs differ) with its file:line in each trace, labels for known false
    alarms (a view after an uncaptured kernel, an async destination read early), and what to
    widen when the origin lies outside the capture. Read-only: compare_traces records."""
    res, _, _ = _compare(ws, args, progress)
    return FirstDivergenceOut(
        status=res.status,
        complete=res.complete,
        ranks=[
            RankDivergence(
                rank=r.rank,
                status=r.status,
                origin=r.origin,
                first_divergence=r.first_divergence,
                candidates=r.candidates[:MAX_UNMATCHED_SHOWN],
                first_receiver=r.first_receiver,
                outside_scope=r.outside_scope,
                unmatched_total=r.unmatched_total,
                notes=r.notes[:MAX_LIST_ITEMS],
            )
            for r in res.ranks
        ],
        cross_rank=res.summary,
        warnings=res.warnings[:MAX_LIST_ITEMS],
        markdown=cap_text(to_markdown(res)),
    )


class ConfirmBytesIn(In):
    dump_a: str = Field(max_length=MAX_PATH_CHARS, description="run A's tensor dump (.pt/.npy)")
    dump_b: str = Field(max_length=MAX_PATH_CHARS, description="run B's dump of the same event")
    hypotheses: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)


class ConfirmBytesOut(BaseModel):
    report: ByteReport
    evidence_id: str


def confirm_bytes(ws: Workspace, args: ConfirmBytesIn, progress: Progress) -> ConfirmBytesOut:
    """Compare the dumped tensors of one event from both runs bit for bit: differing
    elements by bit pattern (-0.0 is not 0.0), maximum ULP distance, bit-position histogram,
    first differing indices. The hash narrows; the bytes settle it. Recorded as byte-compare
    evidence. Dumps load without pickle (weights-only / allow_pickle=False)."""
    ws.require_hypotheses(args.hypotheses)
    pa = ws.path(args.dump_a, must_exist=True)
    pb = ws.path(args.dump_b, must_exist=True)
    rep = compare_bytes(pa, pb)
    diff = [t for t in rep.tensors if not t.equal]
    summary = (
        "bytes equal"
        if rep.equal
        else (
            f"bytes differ in {len(diff)}/{len(rep.tensors)} tensor(s): "
            + ", ".join(
                f"{t.name} {t.differing}/{t.numel} elements, max {t.max_ulp} ulp" for t in diff[:5]
            )
        )
    )
    ev = ws.ledger.add_evidence(
        Evidence(
            hypotheses=args.hypotheses,
            kind=EvidenceKind.byte_compare,
            result=EvidenceResult.observed,
            summary=summary,
            data=ByteCompareData.model_validate(rep.model_dump(mode="json")),
            artifacts=[ws.ledger.artifact(pa, "dump a"), ws.ledger.artifact(pb, "dump b")],
        )
    )
    return ConfirmBytesOut(report=rep, evidence_id=ev.id)

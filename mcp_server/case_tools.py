"""Tools over the case and the ledger: open/create a case, confirm the mismatch step,
hypotheses, the verdict, notes, the summary and the report.

Each function checks paths through the Workspace and calls one library function. The
rules (a status needs execution evidence, a verdict a supported hypothesis, one case per
ledger) live in the ledger, which checks them under its lock for every caller alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from triage_agent.config import case_from_dict, load_case
from triage_agent.errors import InputError
from triage_agent.ledger import LedgerState
from triage_agent.ledger_view import HypothesisRow, hypothesis_rows, results_count, to_markdown
from triage_agent.records import (
    Case,
    Classification,
    Hypothesis,
    HypothesisStatus,
    ReproducerSpec,
    Verdict,
)
from triage_agent.runs import OUT_TOKEN
from triage_agent.workflow.characterize import MismatchReport

from .security import (
    MAX_LIST_ITEMS,
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_TEXT_CHARS,
    Workspace,
    WorkspaceInfo,
    cap_text,
)
from .spec import ID_PATTERN, In, Progress


# -- case ------------------------------------------------------------------------------------
class OpenCaseIn(In):
    path: str | None = Field(
        default=None,
        max_length=MAX_PATH_CHARS,
        description="case file (triage.toml layout), inside the workspace; default: the "
        "file the server was started with, else <workspace>/triage.toml",
    )


class CaseOut(BaseModel):
    case: Case
    recorded: bool = Field(description="whether this call appended the case to the ledger")
    workspace: WorkspaceInfo


def open_case(ws: Workspace, args: OpenCaseIn, progress: Progress) -> CaseOut:
    """Open a case file (triage.toml layout) and record it in the ledger.

    Every path the case names must lie in the workspace or the source roots the server was
    started with. Launch commands are honoured only from the startup case file."""
    if args.path is None and ws.case_file is None:
        raise InputError("no case file: give 'path', or start the server with --case")
    path = ws.path(args.path, must_exist=True) if args.path else ws.case_file
    assert path is not None
    case = load_case(path)
    assert case is not None
    ws.check_case(case, from_startup_file=path == ws.case_file)
    recorded = ws.ledger.record_case(case)
    ws.adopt(case, from_startup_file=path == ws.case_file)
    return CaseOut(case=case, recorded=recorded, workspace=ws.info())


class RunIn(In):
    metrics: str | None = Field(
        default=None, max_length=MAX_PATH_CHARS, description="metric fingerprint file or directory"
    )
    trace_dir: str | None = Field(default=None, max_length=MAX_PATH_CHARS)
    source_repo: str | None = Field(
        default=None, max_length=MAX_PATH_CHARS, description="git repository of the run's code"
    )
    source_rev: str | None = Field(
        default=None, max_length=200, description="git revision (must resolve in source_repo)"
    )


class CreateCaseIn(In):
    name: str = Field(default="case", min_length=1, max_length=MAX_NAME_CHARS)
    description: str = Field(default="", max_length=MAX_TEXT_CHARS)
    run_a: RunIn = Field(description="the reference run")
    run_b: RunIn = Field(description="the suspect run")
    mismatch_step: int | None = Field(default=None, ge=0, le=10**9)
    scan_paths: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    correspondence_map: str | None = Field(default=None, max_length=MAX_PATH_CHARS)


def create_case(ws: Workspace, args: CreateCaseIn, progress: Progress) -> CaseOut:
    """Create a case from two runs' metric fingerprints (and optional sources) and record it.

    Paths are relative to the workspace and must stay inside the allowed roots. A case made
    here has no launch commands: relaunching a run needs a case file started with the
    server."""
    runs: dict[str, dict[str, Any]] = {}
    for key, run in (("a", args.run_a), ("b", args.run_b)):
        d: dict[str, Any] = {"metrics": run.metrics, "trace_dir": run.trace_dir}
        if run.source_repo is not None:
            d["source"] = {"repo": run.source_repo, "rev": run.source_rev}
            if run.source_rev is not None:
                ws.rev(run.source_repo, run.source_rev)
        elif run.source_rev is not None:
            raise InputError(f"run {key}: source_rev needs source_repo")
        runs[key] = {k: v for k, v in d.items() if v is not None}
    raw = {
        "case": {
            "name": args.name,
            "description": args.description,
            "mismatch_step": args.mismatch_step,
            "workspace": str(ws.ledger.workspace),
            "source_roots": [str(r) for r in ws.roots],
            "scan_paths": args.scan_paths,
            "correspondence_map": args.correspondence_map,
        },
        "runs": runs,
    }
    raw["case"] = {k: v for k, v in raw["case"].items() if v is not None}
    case = case_from_dict(raw, ws.root, origin="create_case")
    ws.check_case(case)
    recorded = ws.ledger.record_case(case)
    ws.adopt(case)
    return CaseOut(case=case, recorded=recorded, workspace=ws.info())


# -- the mismatch step -----------------------------------------------------------------------
class ConfirmMismatchIn(In):
    step: int | None = Field(
        default=None, ge=0, le=10**9, description="the step you believe first differs"
    )
    relaunch: bool = Field(
        default=False,
        description="when the case's metrics come from relaunching its runs ('{out}'), run "
        "both baselines (cached after the first time) with the case's own launch commands",
    )
    timeout_s: float = Field(default=600.0, gt=0, le=3600, description="per launch command")


def _baseline_metrics(
    ws: Workspace, case: Case, args: ConfirmMismatchIn, progress: Progress
) -> list[Path]:
    from triage_agent.workflow.engine import baselines

    if not args.relaunch:
        raise InputError(
            "this case's metrics are produced by relaunching its runs: call again with "
            "relaunch=true (runs both with the case's launch commands, cached afterwards)"
        )
    ws.require_launch()
    ma, mb = baselines(case, ws.ledger, lambda stage, msg: progress(0, None, f"{stage}: {msg}"))
    if ma is None or mb is None:
        raise InputError(
            "the case's runs are not relaunchable: each needs launch and {out} metrics"
        )
    return [ws.path(ma, must_exist=True), ws.path(mb, must_exist=True)]


class MismatchOut(BaseModel):
    evidence_id: str = Field(
        description="the metrics evidence this call recorded: cite it in a verdict's chain"
    )
    confirmed: bool = Field(description="the metric bits first differ at the claimed step")
    common_steps: int = Field(description="steps both runs logged (the list in report is capped)")
    complete: bool = Field(
        description="both runs hold the same ranks and steps; false: 'equal' covers only "
        "what both have (see the diff's only_in_* and ranks_only_in_*)"
    )
    report: MismatchReport = Field(
        description="first differing step, what differs, the phase of the interval, and what "
        "the runs were told differently (declared: a launch flag, positional argument, "
        "environment variable or config key, with both values)"
    )


def confirm_mismatch(ws: Workspace, args: ConfirmMismatchIn, progress: Progress) -> MismatchOut:
    """Find the first step whose metric bits differ between the runs, characterise the
    interval (first step, resume, accumulation boundary, multi-rank, update), list what the
    runs were told differently (environment variables, launch flags, positional arguments,
    config keys, each with both values) and record it as metrics evidence, whose id comes
    first in the result. Printed loss is not evidence: the raw bits of every metric are
    compared."""
    from triage_agent.workflow import confirm_mismatch as confirm

    case = ws.require_case()
    if any(r.metrics and OUT_TOKEN in r.metrics for r in (case.run_a, case.run_b)):
        paths = _baseline_metrics(ws, case, args, progress)
    else:
        paths = []
        for run in (case.run_a, case.run_b):
            if run.metrics is None:
                raise InputError(f"run {run.name} declares no metrics path")
            paths.append(ws.tree(run.metrics))
    progress(0, 1, "comparing metric bits")
    claimed = args.step if args.step is not None else case.mismatch_step
    rep = confirm(case, ws.ledger, claimed, paths[0], paths[1])
    progress(1, 1, rep.message)
    n = len(rep.diff.common_steps)
    capped = rep.diff.model_copy(
        update={
            "common_steps": rep.diff.common_steps[:MAX_LIST_ITEMS],
            "mismatches": rep.diff.mismatches[:MAX_LIST_ITEMS],
            "only_in_a": rep.diff.only_in_a[:MAX_LIST_ITEMS],
            "only_in_b": rep.diff.only_in_b[:MAX_LIST_ITEMS],
        }
    )
    assert rep.evidence_id is not None  # confirm_mismatch records before it returns
    return MismatchOut(
        evidence_id=rep.evidence_id,
        confirmed=rep.step is not None and not rep.given_step_wrong,
        common_steps=n,
        complete=rep.diff.complete,
        report=rep.model_copy(update={"diff": capped, "declared": rep.declared[:MAX_LIST_ITEMS]}),
    )


# -- the ledger ------------------------------------------------------------------------------
class LedgerSummaryIn(In):
    markdown: bool = Field(default=False, description="also return the ledger as Markdown")


class LedgerSummaryOut(BaseModel):
    ledger: str
    events: int
    case: str | None
    mismatch_step: int | None = Field(
        description="the first step whose metric bits differ, as confirmed from the metric "
        "fingerprints (confirm_mismatch, run_workflow); null until confirmed"
    )
    mismatch_step_given: int | None = Field(description="the step the case file claims, if any")
    findings: int
    hypotheses: list[HypothesisRow]
    evidence: int
    evidence_by_result: dict[str, int] = Field(
        description="the evidence counted by result: supported, refuted, not-applicable "
        "(a test that ran but does not act on the job), inconclusive, error, observed"
    )
    verdict: Verdict | None
    torn_tail: str | None = Field(description="a torn last line that readers ignored, if any")
    markdown: str | None = None


def ledger_summary(ws: Workspace, args: LedgerSummaryIn, progress: Progress) -> LedgerSummaryOut:
    """Summarise the evidence ledger: hypotheses with status and evidence counts, the verdict."""
    st: LedgerState = ws.ledger.state()
    torn = None
    if st.torn_tail:
        torn = f"{st.torn_tail.length} bytes at offset {st.torn_tail.offset}, ignored"
    return LedgerSummaryOut(
        ledger=str(ws.ledger.path),
        events=st.events,
        case=st.case.name if st.case else None,
        mismatch_step=st.confirmed_step(),
        mismatch_step_given=st.case.mismatch_step if st.case else None,
        findings=len(st.findings),
        hypotheses=hypothesis_rows(st)[:MAX_LIST_ITEMS],
        evidence=len(st.evidence),
        evidence_by_result=results_count(st.evidence),
        verdict=st.verdict,
        torn_tail=torn,
        markdown=cap_text(to_markdown(st)) if args.markdown else None,
    )


class RecordHypothesisIn(In):
    statement: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    category: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    findings: list[str] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS, description="finding ids it rests on"
    )
    reproducer: ReproducerSpec | None = Field(
        default=None, description="the reproducer template (and parameters) that can test it"
    )


class HypothesisOut(BaseModel):
    hypothesis: Hypothesis


def record_hypothesis(ws: Workspace, args: RecordHypothesisIn, progress: Progress) -> HypothesisOut:
    """Record a hypothesis (status open). It stays a hypothesis until execution evidence
    supports or refutes it."""
    hyp = Hypothesis(
        statement=args.statement,
        category=args.category,
        findings=args.findings,
        reproducer=args.reproducer,
    )
    return HypothesisOut(hypothesis=ws.ledger.put_hypothesis(hyp))


class UpdateHypothesisIn(In):
    id: str = Field(min_length=1, max_length=64, pattern=ID_PATTERN)
    status: HypothesisStatus | None = None
    classification: Classification | None = None
    statement: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT_CHARS)
    evidence: list[str] = Field(
        default_factory=list,
        max_length=MAX_LIST_ITEMS,
        description="evidence ids that justify a supported/refuted status",
    )
    reason: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description="why, when the status goes against evidence that says otherwise (a "
        "supported status while a rerun refuted it): required then, and recorded",
    )


def update_hypothesis(ws: Workspace, args: UpdateHypothesisIn, progress: Progress) -> HypothesisOut:
    """Change a hypothesis' status, classification or wording. 'supported' and 'refuted'
    need cited execution evidence about it with that result; against evidence that says the
    opposite, also a reason (recorded with the hypothesis)."""
    changes = args.model_dump(exclude={"id", "evidence", "reason"}, exclude_none=True)
    if not changes:
        raise InputError("nothing to update: give status, classification or statement")
    hyp = ws.ledger.update_hypothesis(
        args.id, evidence=args.evidence, reason=args.reason, **changes
    )
    return HypothesisOut(hypothesis=hyp)


class RecordVerdictIn(In):
    hypothesis: str | None = Field(
        default=None, max_length=64, description="a supported hypothesis"
    )
    classification: Classification
    statement: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    location: str | None = Field(
        default=None, max_length=1000, description="file:line and/or trace event"
    )
    evidence: list[str] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS, description="the evidence chain, in order"
    )
    next_action: str = Field(default="", max_length=MAX_TEXT_CHARS)


class VerdictOut(BaseModel):
    verdict: Verdict


def record_verdict(ws: Workspace, args: RecordVerdictIn, progress: Progress) -> VerdictOut:
    """Record the verdict. Refused unless its evidence chain holds execution evidence and
    its hypothesis (if any) is supported; 'unknown' is always allowed."""
    return VerdictOut(verdict=ws.ledger.set_verdict(Verdict(**args.model_dump())))


class AddNoteIn(In):
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)


class NoteOut(BaseModel):
    recorded: bool
    event_id: str = Field(description="the ledger event holding the note")


def add_note(ws: Workspace, args: AddNoteIn, progress: Progress) -> NoteOut:
    """Append a free-text note to the ledger (a decision, a budget spent, a dead end).
    Notes are never evidence."""
    event = ws.ledger.append("note", {"text": args.text, "source": "mcp"})
    return NoteOut(recorded=True, event_id=event.id)


# -- report ----------------------------------------------------------------------------------
class WriteReportIn(In):
    out_dir: str | None = Field(
        default=None,
        max_length=MAX_PATH_CHARS,
        description="where to write report.md / report.html; default <ledger dir>/report",
    )


class ReportOut(BaseModel):
    markdown: str
    html: str
    plot: str | None
    verdict: Verdict | None


def write_report(ws: Workspace, args: WriteReportIn, progress: Progress) -> ReportOut:
    """Write the reviewer's report (Markdown and a self-contained HTML page) from the ledger:
    the mismatch, hypotheses with their evidence and reproducing commands, trace divergences,
    the verdict with its evidence chain. Overwrites an earlier report in the same directory."""
    from triage_agent.report import write_report as write

    out = ws.tree(args.out_dir, must_exist=False) if args.out_dir else ws.output_dir("report")
    paths = write(ws.ledger, out)
    return ReportOut(**paths.model_dump(), verdict=ws.ledger.state().verdict)

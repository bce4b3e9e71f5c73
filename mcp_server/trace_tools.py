"""Stage-2 capture: relaunch a case run with tracing over a window at a level.

``capture_trace`` runs only the launch commands of the case file the server was started
with (through ``triage_agent.runs.materialize``, which injects the tracer, applies a timeout
that kills the process group and caches by content); the tool takes a run name, a step
window and a capture level, never a command.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from triage_agent.errors import InputError
from triage_agent.evidence_data import RerunData
from triage_agent.records import Evidence, EvidenceKind, EvidenceResult

from .security import MAX_LIST_ITEMS, Workspace
from .spec import In, Progress


class CaptureTraceIn(In):
    run: Literal["a", "b"] = Field(description="which run of the case to relaunch")
    first_step: int = Field(ge=0, le=10**9, description="first step of the traced window")
    last_step: int = Field(ge=0, le=10**9, description="last step of the traced window")
    level: Literal["collective", "module", "op"] = Field(
        default="module",
        description="collective: collectives + optimizer; module: + module outputs/grads; "
        "op: + ATen ops inside 'scope'. Narrowest cost first.",
    )
    scope: str | None = Field(
        default=None, max_length=500, description="regex over module scopes (op level)"
    )
    ranks: list[int] | None = Field(default=None, max_length=1024, description="None: all")
    dump: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="fnmatch patterns ('name' or 'scope:name') whose tensors are saved whole",
    )
    digest: Literal["xor", "order", "both"] = "xor"
    hypotheses: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    timeout_s: float = Field(default=600.0, gt=0, le=3600, description="per launch command")


class CaptureTraceOut(BaseModel):
    run: str
    trace_dir: str | None
    exit_codes: list[int]
    seconds: float
    cached: bool
    argv: list[list[str]]
    warnings: list[str]
    evidence_id: str


def capture_trace(ws: Workspace, args: CaptureTraceIn, progress: Progress) -> CaptureTraceOut:
    """Relaunch one run of the case with tracing over a step window at a capture level, using
    the case's own launch commands (never a command from the caller). Every rank writes its
    own trace; nothing synchronises ranks. Recorded as rerun evidence with the trace files'
    sha256. Start narrow (collective, a 1-2 step window) and widen only where the comparison
    says the origin lies outside the capture."""
    from triage_agent.fingerprint import CaptureConfig
    from triage_agent.runs import materialize

    case = ws.require_launch()
    ws.require_hypotheses(args.hypotheses)
    if args.last_step < args.first_step:
        raise InputError(f"empty window: last_step {args.last_step} < first_step {args.first_step}")
    run = case.run_a if args.run == "a" else case.run_b
    ws.output_dir("runs")
    cfg = CaptureConfig(
        out_dir=ws.ledger.workspace / "runs",  # replaced per command by materialize
        steps=(args.first_step, args.last_step),
        level=args.level,
        scope=args.scope,
        ranks=args.ranks,
        dump=args.dump,
        digest=args.digest,
    )
    progress(0, None, f"relaunching run {run.name} with {args.level} tracing")
    out = materialize(
        run,
        ws.ledger.workspace,
        f"trace-{args.level}",
        capture=cfg,
        timeout_s=min(args.timeout_s, case.timeout_s),
        progress=lambda msg: progress(0, None, msg),
    )
    files = []
    if out.trace_dir:
        files = sorted(p for p in ws.path(out.trace_dir).glob("trace_rank*.jsonl") if p.is_file())
    result = EvidenceResult.observed if out.ok and files else EvidenceResult.error
    summary = (
        f"run {run.name} traced at level {args.level}, steps {args.first_step}-{args.last_step}: "
        f"{len(files)} rank trace(s), exit codes {out.exit_codes}"
        + (" (cached)" if out.cached else "")
    )
    ev = ws.ledger.add_evidence(
        Evidence(
            hypotheses=args.hypotheses,
            kind=EvidenceKind.rerun,
            result=result,
            summary=summary,
            argv=out.argv[0] if out.argv else None,
            data=RerunData(
                trace_dir=out.trace_dir,
                commands=out.argv,
                capture=cfg.model_dump(mode="json", exclude={"out_dir"}),
                warnings=out.warnings[:MAX_LIST_ITEMS],
            ),
            artifacts=[ws.ledger.artifact(f, role="trace") for f in files],
            duration_s=out.seconds,
        )
    )
    progress(1, 1, summary)
    return CaptureTraceOut(
        run=run.name,
        trace_dir=out.trace_dir,
        exit_codes=out.exit_codes,
        seconds=out.seconds,
        cached=out.cached,
        argv=out.argv,
        warnings=out.warnings[:MAX_LIST_ITEMS],
        evidence_id=ev.id,
    )

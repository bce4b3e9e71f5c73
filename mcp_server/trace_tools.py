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
    bits_equal_untraced: bool | None = Field(
        description="whether the traced run's metric bits equal its untraced baseline's at "
        "every step; null when no baseline of that run is recorded yet"
    )
    bits_said: str = Field(description="that comparison in words (or why there is none)")


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
    equal, said = _against_baseline(run, ws, out)
    summary = (
        f"run {run.name} traced at level {args.level}, steps {args.first_step}-{args.last_step}: "
        f"{len(files)} rank trace(s), exit codes {out.exit_codes}"
        + (" (cached)" if out.cached else "")
        + f"; {said}"
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
        bits_equal_untraced=equal,
        bits_said=said,
    )


def _against_baseline(run, ws: Workspace, out) -> tuple[bool | None, str]:
    """The traced run's metric bits against its untraced baseline's, when one is recorded:
    a trace whose run computes other bits than the run it stands for is not evidence of it."""
    from triage_agent.metrics import diff_metrics, load_metrics
    from triage_agent.runs import finished

    if not out.ok or out.metrics is None:
        return None, "the traced run did not finish: its bits are not compared"
    base = finished(run, ws.ledger.workspace)
    if base is None or base.metrics is None:
        return None, (
            f"no untraced baseline of run {run.name} is recorded, so the traced bits are not "
            "compared (confirm_mismatch with relaunch=true records one)"
        )
    d = diff_metrics(load_metrics(base.metrics), load_metrics(out.metrics))
    if d.first_step is not None:
        return False, (
            f"tracing changed run {run.name}'s metric bits from step {d.first_step}: this trace "
            "does not stand for the untraced run"
        )
    if not d.complete:
        return False, f"the traced run {run.name} stopped short of its baseline ({d.gaps()})"
    return True, f"metric bits equal to run {run.name}'s untraced baseline at every step"

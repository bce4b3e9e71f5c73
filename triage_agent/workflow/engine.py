"""The deterministic policy that drives the two stages end to end (`triage run`).

Order: record the case -> baselines (cached) -> confirm and characterise the mismatch ->
stage 1 within budget -> stage 2 tracing (to hunt the origin when stage 1 explained
nothing, or to confirm that the observed first divergence is the one a supported
hypothesis explains) -> one-policy fix validation, uninstrumented -> verdict.

Resumable: each finished stage is a `stage` event in the ledger; hypotheses already tested
keep their evidence, so a second `triage run` after Ctrl-C continues where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from ..errors import InputError
from ..ledger import Ledger
from ..records import (
    Case,
    Classification,
    Evidence,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    HypothesisStatus,
    Verdict,
)
from ..runs import OUT_TOKEN, materialize_case
from .characterize import MismatchReport, confirm_mismatch
from .classify import CLASSIFICATION, FIX_POLICY, FIX_TEXT
from .fixcheck import bisect_changed_files, validate_fix, validate_revert
from .stage1 import run_stage1


class RunOptions(BaseModel):
    mismatch_step: int | None = None
    budget_minutes: float = 30.0
    max_hypotheses: int = Field(default=3, ge=1, le=20)
    confirm_trace: bool = True
    timeout_s: float = 600.0


class WorkflowResult(BaseModel):
    mismatch: MismatchReport | None
    verdict: Verdict | None
    seconds: float
    notes: list[str] = Field(default_factory=list)


Status = Callable[[str, str], None]  # (stage, message)


def _relaunchable(case: Case) -> bool:
    return all(r.launch and r.metrics and OUT_TOKEN in r.metrics for r in (case.run_a, case.run_b))


def _record_case(ledger: Ledger, case: Case) -> None:
    st = ledger.state()
    if st.case is None:
        ledger.set_case(case)
        return
    old = st.case.model_dump(exclude={"mismatch_step"})
    if old != case.model_dump(exclude={"mismatch_step"}):
        raise InputError(
            f"the workspace {ledger.workspace} holds a ledger for another case ({st.case.name!r}); "
            "use --workspace DIR for this case or move the old ledger away"
        )


def baselines(
    case: Case, ledger: Ledger, opts: RunOptions, status: Status
) -> tuple[Path | None, Path | None]:
    """The untraced runs' metric files, launched once and cached in the workspace."""
    if not _relaunchable(case):
        return None, None
    status("baseline", "runs A and B, untraced (cached after the first time)")
    outs = materialize_case(case, Path(ledger.workspace), progress=lambda m: status("baseline", m))
    for o in outs:
        if not o.cached:
            ledger.note(
                f"baseline run {o.run} took {o.seconds:.1f} s",
                argv=[" ".join(a) for a in o.argv],
                out_dir=o.out_dir,
            )
    return Path(outs[0].metrics), Path(outs[1].metrics)


def run_workflow(
    case: Case, ledger: Ledger, opts: RunOptions, status: Status | None = None
) -> WorkflowResult:
    status = status or (lambda stage, msg: None)
    t0 = time.monotonic()
    deadline = t0 + opts.budget_minutes * 60
    _record_case(ledger, case)
    ma, mb = baselines(case, ledger, opts, status)

    status("confirm", "reading metric fingerprints")
    st = ledger.state()
    if "confirm" not in st.stages_done():
        rep = confirm_mismatch(case, ledger, opts.mismatch_step, ma, mb)
        ledger.stage("confirm", "done", step=rep.step, phases=rep.phases)
    else:
        from .characterize import characterize

        rep = characterize(case, opts.mismatch_step, ma, mb)
    if rep.step is None:
        return WorkflowResult(
            mismatch=rep, verdict=None, seconds=time.monotonic() - t0, notes=[rep.message]
        )
    case = case.model_copy(update={"mismatch_step": rep.step})

    status("stage 1", "bounded static scan")
    run_stage1(
        case,
        ledger,
        rep,
        max_hypotheses=opts.max_hypotheses,
        timeout_s=opts.timeout_s,
        deadline=deadline,
        on_status=lambda m: status("stage 1", m),
    )
    st = ledger.state()
    supported = [h for h in st.hypotheses.values() if h.status == HypothesisStatus.supported]

    trace_ev: Evidence | None = None
    origin_hyp: Hypothesis | None = None
    if (
        _relaunchable(case)
        and (not supported or opts.confirm_trace)
        and time.monotonic() < deadline
    ):
        from .stage2 import run_stage2

        status("stage 2", f"tracing steps {max(rep.step - 1, 0)}-{rep.step}")
        trace_ev, origin_hyp = run_stage2(
            case,
            ledger,
            rep,
            supported,
            timeout_s=opts.timeout_s,
            on_status=lambda m: status("stage 2", m),
        )
    candidates = _candidates(ledger, trace_ev)
    if not candidates and origin_hyp is not None and ma is not None:
        # The trace origin is only a hypothesis until an intervention moves the bits.
        origin_hyp = ledger.state().hypotheses.get(origin_hyp.id, origin_hyp)
        policy = FIX_POLICY.get(origin_hyp.category)
        if origin_hyp.status == HypothesisStatus.supported:
            candidates = [origin_hyp]
        elif policy and _time_left(ledger, deadline, "validating the trace origin's fix"):
            ev = _prior_rerun(ledger, origin_hyp.id) or validate_fix(
                case,
                ledger,
                policy,
                [origin_hyp.id],
                str(ma),
                timeout_s=opts.timeout_s,
                on_status=lambda m: status("fix", m),
            )
            if ev.result == EvidenceResult.supported:
                candidates = [
                    ledger.update_hypothesis(origin_hyp.id, status=HypothesisStatus.supported)
                ]

    if (
        not candidates
        and rep.source_differs
        and ma is not None
        and _relaunchable(case)
        and _time_left(ledger, deadline, "reverting changed files one at a time")
    ):
        hyp = bisect_changed_files(
            case,
            ledger,
            str(ma),
            timeout_s=opts.timeout_s,
            deadline=deadline,
            on_status=lambda m: status("fix", m),
        )
        if hyp is not None:
            candidates = [hyp]

    verdict = decide(case, ledger, rep, candidates, trace_ev, ma, opts, status, deadline)
    return WorkflowResult(mismatch=rep, verdict=verdict, seconds=time.monotonic() - t0)


def _time_left(ledger: Ledger, deadline: float, what: str) -> bool:
    if time.monotonic() < deadline:
        return True
    ledger.note(
        f"budget reached: not {what}; `triage run --budget-minutes M` resumes with more time",
        level="warning",
    )
    return False


def _prior_rerun(ledger: Ledger, hyp_id: str) -> Evidence | None:
    prior = [
        e
        for e in ledger.state().evidence_for(hyp_id)
        if e.kind == EvidenceKind.rerun and e.result != EvidenceResult.error
    ]
    return prior[-1] if prior else None


def _candidates(ledger: Ledger, trace_ev: Evidence | None) -> list[Hypothesis]:
    """Supported hypotheses that may carry the verdict.

    When the trace found an origin, only hypotheses that explain it qualify: a hypothesis a
    reproducer supports in isolation but that predicts a different first divergence than the
    one observed is not the cause of this mismatch, and the ledger says so.
    """
    st = ledger.state()
    supported = [h for h in st.hypotheses.values() if h.status == HypothesisStatus.supported]
    if trace_ev is None or not trace_ev.data.get("origin"):
        return supported
    explained = set(trace_ev.data.get("explains", []))
    keep = [
        h for h in supported if h.id in explained or trace_ev.data.get("origin_hypothesis") == h.id
    ]
    dropped = [h.id for h in supported if h not in keep]
    if dropped:
        ledger.note(
            f"supported hypotheses {', '.join(dropped)} do not explain the observed first divergence "
            f"({trace_ev.data.get('origin_location')}); they are not taken as its cause"
        )
    return keep


def decide(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    candidates: list[Hypothesis],
    trace_ev: Evidence | None,
    baseline_a: Path | None,
    opts: RunOptions,
    status: Status,
    deadline: float,
) -> Verdict:
    st = ledger.state()
    # Reuse a recorded verdict only if nothing was learnt since (a resumed run may have).
    if (
        st.verdict is not None
        and "verdict" in st.stages_done()
        and not any(e.created > st.verdict.created for e in st.evidence)
    ):
        return st.verdict
    hyp = candidates[0] if candidates else None
    chain: list[str] = [e.id for e in st.evidence if e.kind == EvidenceKind.metrics][-1:]
    if hyp is None:
        where = (
            (trace_ev.data.get("origin_location") or trace_ev.data.get("first_location"))
            if trace_ev
            else None
        )
        v = Verdict(
            classification=Classification.unknown,
            statement=(
                f"metric bits first differ at step {rep.step}; no hypothesis that explains the "
                "observed divergence was supported by execution evidence"
                + (f"; the first divergence observed is {where}" if where else "")
            ),
            location=where,
            evidence=chain + ([trace_ev.id] if trace_ev else []),
            next_action=(trace_ev.data.get("widen") if trace_ev else None)
            or (
                f"the trace step failed ({trace_ev.id}): {trace_ev.summary}"
                if trace_ev is not None and trace_ev.result == EvidenceResult.error
                else None
            )
            or "widen the trace (more steps, ranks, op level) or add a case-specific reproducer",
        )
        ledger.set_verdict(v)
        ledger.stage("verdict", "done")
        return v
    chain += [
        e.id
        for e in st.evidence_for(hyp.id)
        if e.kind in (EvidenceKind.reproducer, EvidenceKind.replay, EvidenceKind.byte_compare)
        and e.result == EvidenceResult.supported
    ]
    if trace_ev is not None:
        chain.append(trace_ev.id)
    findings = [st.findings[f] for f in hyp.findings if f in st.findings]
    policy = FIX_POLICY.get(hyp.category)
    fix_ev: Evidence | None = _prior_rerun(ledger, hyp.id)
    if (
        fix_ev is None
        and baseline_a is not None
        and _relaunchable(case)
        and _time_left(ledger, deadline, "validating the fix")
    ):
        if policy:
            fix_ev = validate_fix(
                case,
                ledger,
                policy,
                [hyp.id],
                str(baseline_a),
                timeout_s=opts.timeout_s,
                on_status=lambda m: status("fix", m),
            )
        elif rep.source_differs and findings:
            fix_ev = validate_revert(
                case,
                ledger,
                findings[0].file,
                [hyp.id],
                str(baseline_a),
                timeout_s=opts.timeout_s,
                on_status=lambda m: status("fix", m),
            )
    if fix_ev is not None:
        chain.append(fix_ev.id)
    loc_parts = []
    if findings:
        f = findings[0]
        loc_parts.append(f"{f.file}:{f.line_start}" + (f" ({f.function})" if f.function else ""))
    if not findings and hyp.category == "source-change":
        loc_parts.append(hyp.rationale.split(" ", 1)[0])
    if trace_ev is not None and trace_ev.data.get("origin_location"):
        loc_parts.append(f"first divergence: {trace_ev.data['origin_location']}")
    fix_text = FIX_TEXT.get(hyp.category, "")
    if fix_ev is None:
        fix_text += (
            ". Not validated: no intervention was run (no policy or revert applies, or no relaunch)"
        )
    elif fix_ev.result == EvidenceResult.supported:
        fix_text += f". Validated: {fix_ev.summary}"
    else:
        fix_text += f". Not validated: {fix_ev.summary}"
    v = Verdict(
        hypothesis=hyp.id,
        classification=CLASSIFICATION.get(hyp.category, Classification.unknown),
        statement=f"step {rep.step}: {hyp.statement}",
        location="; ".join(loc_parts) or None,
        evidence=list(dict.fromkeys(chain)),
        next_action=fix_text,
    )
    ledger.set_verdict(v)
    ledger.stage("verdict", "done")
    return v

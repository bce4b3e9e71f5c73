"""The workflow end to end (`triage run`): one loop of general moves.

Baselines (cached) and the metric bits first: where the runs first differ and in what phase
(a run that fails outright is handled as an outcome, :mod:`.crash`). Then the loop: the
situation (:mod:`.situation`: everything the ledger holds and this process observed) goes
to the proposers (:mod:`.proposers`, pure functions from evidence to moves), the chooser
(:mod:`.chooser`) picks the move with the best separation per second and writes its choice
and the alternatives to the ledger, the move is made (:mod:`.moves`: observe, test, read),
and what it learnt is in the situation for the next round. The loop ends when no move is
left (a hypothesis is proven and read, or nothing more can be tried) or the budget is spent.
Then the verdict (:func:`decide`): only from a hypothesis whose intervention made every
step match, or, weaker and labelled so, one a reproducer supports and the trace origin
confirms; otherwise `unknown` with the best localisation.

Resumable: each finished observation is a `stage` event in the ledger that records the
mismatch step it was computed for, and every test keeps its evidence, so a second
`triage run` after Ctrl-C rebuilds the situation from the ledger and continues where it
stopped; one whose step differs (other metrics, other baselines) redoes what depended on it.
`suggest_next` shows the chooser's ranking for the case as the ledger holds it, launching
nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from ..compare.executors import check_reachable
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
from ..runs import OUT_TOKEN, RunOutcome, finished, materialize_case
from .arms import Arm, prior_rerun
from .boundary_state import BoundaryState, state_step
from .characterize import MismatchReport, characterize, confirm_mismatch
from .chooser import Suggestion, ranked, suggestions
from .chooser import choose as choose_next
from .classify import CLASSIFICATION, FIX_POLICY, FIX_TEXT
from .crash import crash_cause, failed_baseline, report_failure
from .declared import declared_differences, hypothesis_for
from .execution_setting import EXECUTION_POLICIES, read_policy_proof
from .fixcheck import validate_fix, validate_revert
from .markers import done_for, unchanged_since_verdict
from .moves import make, outside_the_change, traced_replica_arms
from .options import RunOptions
from .recorded import sentinel_reading
from .situation import Situation
from .stage2 import Stage2Result
from .structural import extra_call_arms
from .timing import StageClock, StageTime, record


class WorkflowResult(BaseModel):
    mismatch: MismatchReport | None
    verdict: Verdict | None
    seconds: float
    notes: list[str] = Field(default_factory=list)
    stages: list[StageTime] = Field(
        default_factory=list, description="wall seconds and run launches per stage"
    )


Status = Callable[[str, str], None]  # (stage, message)


def _relaunchable(case: Case) -> bool:
    return all(r.launch and r.metrics and OUT_TOKEN in r.metrics for r in (case.run_a, case.run_b))


class OneRunFailed(InputError):
    """One baseline failed where the other completed: the outcome to report (recorded as
    the verdict). Other callers of :func:`baselines` see a one-line input error."""

    def __init__(self, verdict: Verdict, outs: tuple[RunOutcome, RunOutcome]) -> None:
        super().__init__(verdict.statement)
        self.verdict = verdict
        self.outs = outs  # (failed, completed)


def baselines(case: Case, ledger: Ledger, status: Status) -> tuple[Path | None, Path | None]:
    """The untraced runs' metric files, launched once and cached in the workspace. Raises
    OneRunFailed (its verdict recorded) when exactly one of them fails, InputError when both
    do."""
    if not _relaunchable(case):
        return None, None
    # A mismatch step known before the launch: the baselines also capture the state at the
    # boundaries around it as they run (only reads; the run goes on to its end), which spares
    # the state relaunch of both runs, a launch round the user waits for.
    k = case.mismatch_step - 1 if case.mismatch_step else None
    status(
        "baseline",
        "runs A and B, untraced"
        + (f", capturing the state around step {k}" if k is not None else "")
        + " (cached after the first time)",
    )
    outs = materialize_case(
        case,
        Path(ledger.workspace),
        progress=lambda m: status("baseline", m),
        check=False,
        state_after=k,
    )
    for o in outs:
        if not o.cached:
            captured = (
                f", capturing the state after initialisation and around step {o.state_after} "
                "(reads only; the run went on to its end)"
                if o.state_after is not None
                else ""
            )
            ledger.note(
                f"baseline run {o.run} took {o.seconds:.1f} s{captured}",
                argv=[" ".join(a) for a in o.argv],
                out_dir=o.out_dir,
            )
    held = {n["text"] for n in ledger.state().notes if n.get("caveat")}
    for o in outs:
        if o.abnormal_exit is not None:
            said = f"{o.abnormal_exit.said(o.run)}; its metrics are compared as usual"
            if said not in held:
                ledger.caveat(said, abnormal_exit=o.abnormal_exit.model_dump(mode="json"))
    one = failed_baseline(outs)
    if one is not None:
        raise OneRunFailed(report_failure(ledger, *one), one)
    bad = next((o for o in outs if not o.ok), None)
    if bad is not None:
        raise InputError(f"baseline {bad.error or f'run {bad.run!r} failed'}")
    return Path(outs[0].metrics), Path(outs[1].metrics)


def _confirm(
    case: Case, ledger: Ledger, given: int | None, ma: Path | None, mb: Path | None
) -> MismatchReport:
    """Characterise (pure, cheap); record it unless the ledger holds this very result."""
    rep = characterize(case, given, ma, mb)
    mark = done_for(ledger.state(), "confirm", rep.step)
    if mark is None or mark.get("given") != given:
        rep = confirm_mismatch(case, ledger, given, ma, mb)
        ledger.stage("confirm", "done", step=rep.step, given=given, phases=rep.phases)
    return rep


def run_workflow(
    case: Case, ledger: Ledger, opts: RunOptions, status: Status | None = None
) -> WorkflowResult:
    """The whole workflow; where its time went is in the result and in the ledger."""
    if opts.executor.ray is not None:
        check_reachable(opts.executor.ray)  # now, not after minutes of launches
    clock = StageClock()
    result = _run_workflow(case, ledger, opts, clock.watch(status or (lambda stage, msg: None)))
    times = clock.times()
    record(ledger, times)
    return result.model_copy(update={"stages": times})


def _run_workflow(case: Case, ledger: Ledger, opts: RunOptions, status: Status) -> WorkflowResult:
    t0 = time.monotonic()
    deadline = t0 + opts.budget_minutes * 60
    given = opts.mismatch_step if opts.mismatch_step is not None else case.mismatch_step
    case = case.model_copy(update={"mismatch_step": given})
    if ledger.record_case(case) and given is not None:
        ledger.note(f"mismatch step given: {given}")
    try:
        ma, mb = baselines(case, ledger, status)
    except OneRunFailed as failed:
        bad, good = failed.outs
        proven = crash_cause(
            case,
            ledger,
            bad,
            good,
            _declared_arms(case, ledger, (good, bad) if bad.run == "b" else (bad, good)),
            timeout_s=opts.timeout_s,
            deadline=deadline,
            on_status=lambda m: status("intervene", m),
        )
        verdict = proven or failed.verdict
        status("verdict", verdict.statement)
        return WorkflowResult(mismatch=None, verdict=verdict, seconds=time.monotonic() - t0)

    status("confirm", "reading metric fingerprints")
    rep = _confirm(case, ledger, given, ma, mb)
    sentinel_reading(case, ledger)
    if rep.step is None:
        caveats = [n["text"] for n in ledger.state().notes if n.get("caveat")]
        return WorkflowResult(
            mismatch=rep,
            verdict=None,
            seconds=time.monotonic() - t0,
            notes=[rep.message, *caveats],
        )
    case = case.model_copy(update={"mismatch_step": rep.step})
    outs = materialize_case(case, Path(ledger.workspace)) if _relaunchable(case) and ma else None
    sit = situation(case, ledger, rep, opts, deadline, outs)
    for d in sit.declared:
        if not d.tests():
            ledger.note(
                f"declared difference not testable: {d.said()} (no intervention changes it)"
            )
    loop(sit, status)
    candidates = _candidates(ledger, sit.trace)
    if not candidates and sit.bisect_found is not None:
        candidates = [sit.bisect_found]
    candidates = _ranked(ledger, candidates)

    status("verdict", "weighing the evidence")
    verdict = decide(
        case, ledger, rep, candidates, sit.trace, ma, opts, status, deadline, sit.where
    )
    return WorkflowResult(mismatch=rep, verdict=verdict, seconds=time.monotonic() - t0)


def situation(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    opts: RunOptions,
    deadline: float,
    outs: tuple[RunOutcome, RunOutcome] | None,
) -> Situation:
    """The situation the loop starts from: the baselines, the declared differences, and what
    the ledger already holds (a resumed run continues from it). Launches nothing."""
    ma = Path(outs[0].metrics) if outs and outs[0].metrics else None
    mb = Path(outs[1].metrics) if outs and outs[1].metrics else None
    declared = declared_differences(case, outs[0].provenance, outs[1].provenance) if outs else []
    launch_s = max((o.seconds for o in outs or () if o.seconds), default=None)
    sit = Situation(
        case, ledger, rep, opts, deadline, baselines=(ma, mb), declared=declared, launch_s=launch_s
    )
    for d in declared:
        sit.where.setdefault(hypothesis_for(d).id, d.location())
    dirs = [Path(o.out_dir) / "boundaries" for o in outs or ()]
    if len(dirs) == 2 and all((d / "side.json").is_file() for d in dirs):
        sit.boundaries = (dirs[0], dirs[1])
    k = state_step(rep) if rep.step is not None else None
    sit.state_in_baselines = bool(outs) and all(o.state_after == k for o in outs or ())
    st = ledger.state()
    mark = done_for(st, "state", rep.step)
    if mark is not None and mark.get("result") is not None:
        sit.state_arms = BoundaryState.model_validate(mark["result"]).arms
        for a in sit.state_arms:
            sit.where[a.hypothesis.id] = a.location
    mark = done_for(st, "trace", rep.step)
    if mark is not None and mark.get("result"):
        prior = Stage2Result.model_validate(mark["result"])
        latest = {e.id: e for e in st.evidence}.get(prior.evidence.id, prior.evidence)
        sit.trace = prior.model_copy(update={"evidence": latest})
        sit.traced = True
        sit.trace_arms = outside_the_change(
            case, traced_replica_arms(sit) + extra_call_arms(case, sit.trace.extra_calls)[0]
        )[0]
        for a in sit.trace_arms:
            sit.where.setdefault(a.hypothesis.id, a.location)
    return sit


class NextMoves(BaseModel):
    """What the loop would do next on this case, from what the ledger holds now."""

    mismatch_step: int | None = Field(description="the first differing step, once confirmed")
    said: str = Field(description="one line: the state of the case and the first proposal")
    suggestions: list[Suggestion] = Field(
        default_factory=list,
        description="the chooser's ranked proposals (observe, test, read) with the evidence "
        "behind each, then the ones held back and why",
    )


def suggest_next(case: Case, ledger: Ledger, opts: RunOptions) -> NextMoves:
    """The chooser's ranked proposals for the case as the ledger holds it. Launches nothing:
    the baselines must have run (``triage run`` or ``confirm_mismatch``)."""
    given = opts.mismatch_step if opts.mismatch_step is not None else case.mismatch_step
    ws = Path(ledger.workspace)
    outs: tuple[RunOutcome, RunOutcome] | None = None
    ma = mb = None
    if _relaunchable(case):
        a, b = finished(case.run_a, ws), finished(case.run_b, ws)
        if a is None or b is None or not (a.ok and b.ok):
            return NextMoves(
                mismatch_step=None,
                said="the baselines have not run (or one failed): run the workflow, or confirm "
                "the mismatch first; nothing can be proposed before the runs are compared",
            )
        outs = (a, b)
        ma, mb = Path(a.metrics or ""), Path(b.metrics or "")
    rep = characterize(case, given, ma, mb)
    if rep.step is None:
        return NextMoves(mismatch_step=None, said=rep.message)
    case = case.model_copy(update={"mismatch_step": rep.step})
    sit = situation(case, ledger, rep, opts, float("inf"), outs)
    out = suggestions(sit)
    if sit.proven() and not any(s.waits is None for s in out):
        said = f"step {rep.step}: proven ({', '.join(h.id for h in sit.proven())}); nothing left to test"
    elif out and out[0].waits is None:
        said = f"step {rep.step}: next, {out[0].move} ({out[0].why})"
    else:
        said = f"step {rep.step}: no move left; the verdict rests on what the ledger holds"
    return NextMoves(mismatch_step=rep.step, said=said, suggestions=out)


def loop(sit: Situation, status: Status) -> None:
    """Observe, propose, choose, make the move; until none is left or the budget is spent."""
    while True:
        move = choose_next(sit)
        if move is None:
            return
        if not sit.time_left():
            left = [m.said for m in ranked(sit)[0]]
            sit.ledger.note(
                f"budget reached: left untried: {'; '.join(left[:6])}; "
                "`triage run --budget-minutes M` resumes with more time",
                level="warning",
            )
            return
        make(move, sit, status)


def _declared_arms(
    case: Case, ledger: Ledger, outs: tuple[RunOutcome, RunOutcome] | None = None
) -> list[Arm]:
    """The declared differences, each with the interventions that give one run the other's
    value, in both directions."""
    a, b = outs or materialize_case(case, Path(ledger.workspace))  # cached: the baselines
    out = []
    for d in declared_differences(case, a.provenance, b.provenance):
        tests = d.tests()
        if not tests:
            ledger.note(
                f"declared difference not testable: {d.said()} (no intervention changes it)"
            )
        out += [
            Arm(
                hypothesis=hypothesis_for(d),
                intervention=text,
                run=run,
                kind=d.kind,
                location=d.location(),
            )
            for run, text in tests
        ]
    return out


# Which proven cause carries the verdict when several are: the most specific change first
# (a call, a policy, a file), the settings the runs were declared to differ in last.
_SPECIFIC = [
    *("inplace-write", "extra-call", "rng-state", "resume-state", "seed-value", "nondeterminism"),
    "source-change",
    *("environment", "precision", "config"),
]


def _ranked(ledger: Ledger, hyps: list[Hypothesis]) -> list[Hypothesis]:
    def key(h: Hypothesis) -> tuple[int, int]:
        cat = str(h.category)
        order = _SPECIFIC.index(cat) if cat in _SPECIFIC else _SPECIFIC.index("source-change")
        return (0 if validated_by_rerun(ledger, h.id) else 1, order)

    return sorted(hyps, key=key)


def _supported(ledger: Ledger) -> list[Hypothesis]:
    st = ledger.state()
    return [h for h in st.hypotheses.values() if h.status == HypothesisStatus.supported]


def _time_left(ledger: Ledger, deadline: float, what: str) -> bool:
    if time.monotonic() < deadline:
        return True
    ledger.note(
        f"budget reached: not {what}; `triage run --budget-minutes M` resumes with more time",
        level="warning",
    )
    return False


def validated_by_rerun(ledger: Ledger, hyp_id: str) -> Evidence | None:
    """The uninstrumented rerun that made every step match with this hypothesis's one change."""
    prior = prior_rerun(ledger, hyp_id)
    return prior if prior is not None and prior.result == EvidenceResult.supported else None


def _candidates(ledger: Ledger, trace: Stage2Result | None) -> list[Hypothesis]:
    """Supported hypotheses that may carry the verdict.

    When the trace found an origin, only hypotheses that explain it qualify: a hypothesis a
    reproducer supports in isolation but that predicts a different first divergence than the
    one observed is not the cause of this mismatch, and the ledger says so. The hypothesis
    derived from the origin explains it by construction, and one whose intervention made
    every step match is proven by the runs themselves, whatever the trace shows.
    """
    supported = _supported(ledger)
    proven = [h for h in supported if validated_by_rerun(ledger, h.id) is not None]
    if trace is None or trace.origin is None:
        if not proven:
            return supported
        # one change made every step match: a reproducer's support of another site, with
        # nothing observed in these runs that it explains, does not make that site a cause
        keep = proven
        why = f"while {proven[0].id}'s intervention made every step match"
    else:
        keep = [
            h
            for h in supported
            if h.id in trace.explains or h.id == trace.origin_hypothesis or h in proven
        ]
        why = f"do not explain the observed first divergence ({trace.origin_location})"
    dropped = [h.id for h in supported if h not in keep]
    if dropped:
        ledger.note(
            f"supported hypotheses {', '.join(dropped)} {why}; they are not taken as its cause "
            "and are marked inconclusive: what supported them holds for their site in "
            "isolation, not for this mismatch"
        )
    for hid in dropped:
        ledger.update_hypothesis(hid, status=HypothesisStatus.inconclusive)
    return keep


def _unknown(
    ledger: Ledger, rep: MismatchReport, trace: Stage2Result | None, chain: list[str]
) -> Verdict:
    where = (trace.origin_location or trace.first_location) if trace else None
    v = Verdict(
        classification=Classification.unknown,
        statement=(
            f"metric bits first differ at step {rep.step}; no hypothesis that explains the "
            "observed divergence was supported by execution evidence"
            + (f"; the first divergence observed is {where}" if where else "")
        ),
        location=where,
        evidence=chain + ([trace.evidence.id] if trace else []),
        next_action=(trace.next_action() if trace else "")
        or "widen the trace (more steps, ranks, op level) or add a case-specific reproducer",
    )
    ledger.set_verdict(v)
    ledger.stage("verdict", "done", step=rep.step)
    return v


def decide(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    candidates: list[Hypothesis],
    trace: Stage2Result | None,
    baseline_a: Path | None,
    opts: RunOptions,
    status: Status,
    deadline: float,
    where: dict[str, str] | None = None,
) -> Verdict:
    st = ledger.state()
    # Reuse a recorded verdict only if it is for this step and nothing was learnt since.
    if (
        st.verdict is not None
        and done_for(st, "verdict", rep.step) is not None
        and unchanged_since_verdict(ledger)
    ):
        return st.verdict
    hyp = candidates[0] if candidates else None
    chain: list[str] = [e.id for e in st.evidence if e.kind == EvidenceKind.metrics][-1:]
    if hyp is None:
        return _unknown(ledger, rep, trace, chain)
    chain += [
        e.id
        for e in st.evidence_for(hyp.id)
        if e.kind in (EvidenceKind.reproducer, EvidenceKind.replay, EvidenceKind.byte_compare)
        and e.result == EvidenceResult.supported
    ]
    if trace is not None:
        chain.append(trace.evidence.id)
    findings = [st.findings[f] for f in hyp.findings if f in st.findings]
    policy = FIX_POLICY.get(hyp.category)
    fix_ev: Evidence | None = prior_rerun(ledger, hyp.id)
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
            try:
                fix_ev = validate_revert(
                    case,
                    ledger,
                    findings[0].file,
                    [hyp.id],
                    str(baseline_a),
                    timeout_s=opts.timeout_s,
                    on_status=lambda m: status("fix", m),
                )
            except InputError as exc:
                ledger.note(f"the fix cannot be validated by a revert: {exc}", level="warning")
    if fix_ev is not None:
        chain.append(fix_ev.id)
    explained = trace is not None and (
        hyp.id in trace.explains or hyp.id == trace.origin_hypothesis
    )
    if not explained and (fix_ev is None or fix_ev.result != EvidenceResult.supported):
        # A reproducer shows the site misbehaves in isolation; only the runs can show it is
        # this mismatch's cause: a trace origin it explains, or its fix making every step match.
        ledger.note(
            f"{hyp.id} is backed by a reproducer alone: no trace origin it explains, and its "
            + ("fix was not run" if fix_ev is None else f"fix did not hold ({fix_ev.summary})")
            + "; it is not taken as the verdict and is marked inconclusive"
        )
        # the ranked candidates after it are no better placed: the first is the best one
        for h in candidates:
            if validated_by_rerun(ledger, h.id) is None and not (
                trace is not None and (h.id in trace.explains or h.id == trace.origin_hypothesis)
            ):
                ledger.update_hypothesis(h.id, status=HypothesisStatus.inconclusive)
        return _unknown(ledger, rep, trace, chain)
    if (
        policy in EXECUTION_POLICIES
        and fix_ev is not None
        and fix_ev.result == EvidenceResult.supported
        and baseline_a is not None
        and not rep.source_differs
        and _time_left(ledger, deadline, "rerunning A under the policy that proved the cause")
    ):
        # B matched under a policy that picks kernels: whether A already runs with it says
        # whether the runs differ in that setting or A breaks repeatability as well
        setting_ev = read_policy_proof(
            case,
            ledger,
            hyp,
            policy,
            str(baseline_a),
            timeout_s=opts.timeout_s,
            on_status=lambda m: status("fix", m),
        )
        if setting_ev is not None:
            chain.append(setting_ev.id)
            hyp = ledger.state().hypotheses[hyp.id]
    loc_parts = []
    if findings:
        f = findings[0]
        loc_parts.append(f"{f.file}:{f.line_start}" + (f" ({f.function})" if f.function else ""))
    if not findings and hyp.category == "source-change" and not (where or {}).get(hyp.id):
        loc_parts.append(hyp.rationale.split(" ", 1)[0])
    if (where or {}).get(hyp.id):
        loc_parts.append(where[hyp.id])
        if where[hyp.id].startswith("setting:"):
            # the declared differences proven beside it are what set it
            loc_parts += [
                f"set by {where[h.id]}"
                for h in st.hypotheses.values()
                if h.id != hyp.id
                and h.status == HypothesisStatus.supported
                and (where.get(h.id) or "").startswith(("config:", "env:"))
                and validated_by_rerun(ledger, h.id) is not None
            ]
    if trace is not None and trace.origin_location:
        loc_parts.append(f"first divergence: {trace.origin_location}")
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
        # a proven source change carries the class its proof gave it (fixcheck's rule)
        classification=hyp.classification
        if hyp.category == "source-change"
        else CLASSIFICATION.get(hyp.category, Classification.unknown),
        statement=f"step {rep.step}: {hyp.statement}",
        location="; ".join(loc_parts) or None,
        evidence=list(dict.fromkeys(chain)),
        next_action=fix_text,
    )
    ledger.set_verdict(v)
    ledger.stage("verdict", "done", step=rep.step)
    return v

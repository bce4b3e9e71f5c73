"""Stage 2: relaunch both runs with tracing around the mismatch, compare, narrow, confirm, replay.

Module level first (forward outputs, gradients, collectives, optimizer state) over [N-1, N].
When the first traced step already receives different inputs, the window moves back by
itself: single steps are traced at module level, bisecting down to the first step (and the
initialisation before it) within the budget, until the step where the difference arises.
Then op level inside the implicated scope with the origin's tensors dumped, when the
module origin is not a leaf. Every traced relaunch is checked against its untraced
baseline: if the capture changed the run's own metric bits, or made the divergence
disappear, the ledger says so and the stage retries with lighter capture instead of
reporting a clean result. What the stage concludes reaches the engine as a typed
:class:`Stage2Result`, and is kept in the stage's marker for a resume.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from ..compare import CompareResult, confirm_bytes, headline
from ..compare.bytes import ByteReport
from ..compare.distributed import Executor, compare_paths
from ..compare.result import Candidate, Divergence, EventRef, Producer, Widen
from ..errors import InputError, TriageError
from ..evidence_data import ByteCompareData, ReplayData, TraceCompareData
from ..fingerprint import CaptureConfig
from ..ledger import Ledger
from ..ledger_rules import BY_LATEST_TEST
from ..records import (
    Case,
    Classification,
    Evidence,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    HypothesisStatus,
)
from ..runs import materialize_both, materialize_case
from .characterize import MismatchReport
from .classify import ATOMIC_OPS, CLASSIFICATION, RANDOM_OPS, EventSite, explains, parse_op
from .fixcheck import relaunch_evidence
from .markers import done_for
from .perturbation import is_repeat, perturbation
from .recorded import recorded_pair
from .structural import first_receivers, unproduced_inputs

LIGHTER = {"op": "module", "module": "collective", "collective": None}


def _where(ref: EventRef | None) -> str:
    if ref is None:
        return "?"
    s = f"rank {ref.rank} step {ref.step} {ref.kind} {ref.scope or '-'}::{ref.name} (call {ref.call}, {ref.phase})"
    return s + (f" from {ref.caller}" if ref.caller else "")


def _rows(res: CompareResult, label: str) -> list[dict]:
    rows = []
    for r in res.ranks:
        d = r.origin or r.first_divergence
        ref = (d.b or d.a) if d else None
        rows.append(
            {
                "label": label,
                "rank": r.rank,
                "role": (d.role if d else r.status) if r.origin or d else r.status,
                "step": ref.step if ref else "",
                "kind": ref.kind if ref else "",
                "scope": ref.scope if ref else "",
                "name": ref.name if ref else "",
                "call": ref.call if ref else "",
                "detail": "; ".join(lab.message for lab in d.labels)
                if d
                else ("outside capture scope" if r.outside_scope else ""),
            }
        )
    return rows


def _origin(res: CompareResult) -> Divergence | None:
    origins = [r.origin for r in res.ranks if r.origin is not None]
    if not origins:
        return None
    return min(origins, key=lambda d: ((d.b or d.a).step, (d.b or d.a).index))


def _first(res: CompareResult) -> Divergence | None:
    """The earliest first difference of any kind (receiver, structural) across ranks."""
    firsts = [r.first_divergence for r in res.ranks if r.first_divergence is not None]
    if not firsts:
        return None
    return min(firsts, key=lambda d: ((d.b or d.a).step, (d.b or d.a).index))


class Earliest(BaseModel):
    """The earliest difference that matters in a comparison, and how it differs."""

    ref: EventRef
    role: str = Field(description="extra, missing, receiver, origin, observed")


def _earliest(res: CompareResult) -> Earliest | None:
    """An event one run executes and the other does not, or the first receiver whose outputs
    differ too (a difference absorbed on the spot is not where anything starts), whichever
    comes first; without either, the first difference of any kind."""
    found: list[Earliest] = []
    for r in res.ranks:
        found += [
            Earliest(ref=c.b or c.a, role=c.kind)
            for c in r.candidates
            if c.kind != "origin" and (c.b or c.a) is not None
        ]
        if r.first_receiver is not None:
            d = r.first_receiver
            found.append(Earliest(ref=d.b or d.a, role="receiver"))
    if not found:
        d = _first(res)
        return Earliest(ref=d.b or d.a, role=d.role) if d else None
    return min(found, key=lambda e: (e.ref.step, e.ref.rank, e.ref.index))


def _extra_calls(res: CompareResult) -> list[Candidate]:
    """Events one run executes and the other does not, earliest first."""
    return sorted(
        (c for r in res.ranks for c in r.candidates if c.kind in ("extra", "missing")),
        key=lambda c: (c.step, c.rank, c.order),
    )


@dataclass
class _Ctx:
    """What every traced relaunch of one stage-2 pass shares."""

    case: Case
    ledger: Ledger
    rep: MismatchReport
    ws: Path
    base: dict[str, str]
    timeout_s: float
    deadline: float
    on_status: Callable[[str], None]
    executor: Executor = field(default_factory=Executor)
    extra_calls: list[Candidate] = field(default_factory=list)

    def saw(self, res: CompareResult) -> None:
        """Keep every event one run executes and the other does not, once."""
        known = {_call_key(c) for c in self.extra_calls}
        for c in _extra_calls(res):
            if _call_key(c) not in known:
                known.add(_call_key(c))
                self.extra_calls.append(c)


def new_context(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None],
    executor: Executor | None = None,
) -> _Ctx:
    """What the traced relaunches of one pass share, the untraced baselines among it."""
    ws = Path(ledger.workspace)
    return _Ctx(
        case=case,
        ledger=ledger,
        rep=rep,
        ws=ws,
        base={o.run: o.metrics for o in materialize_case(case, ws)},
        timeout_s=timeout_s,
        deadline=deadline,
        on_status=on_status,
        executor=executor or Executor(),
    )


def _call_key(c: Candidate) -> tuple:
    return (c.kind, c.rank, c.step, c.event, c.call_site, c.order)


def trace_and_compare(
    ctx: _Ctx, cfg: CaptureConfig, label: str
) -> tuple[CompareResult | None, Evidence]:
    """Trace both runs under ``cfg`` and compare them. A failure comes back as recorded
    error evidence with no comparison; a comparison's evidence is the caller's to record."""
    case, ledger, rep, base = ctx.case, ctx.ledger, ctx.rep, ctx.base
    timeout_s, on_status = ctx.timeout_s, ctx.on_status
    ws = ctx.ws
    level: str | None = cfg.level
    retried = False
    while level is not None:
        on_status(f"{label}: tracing both runs at {level} level, steps {cfg.steps}")
        cfg = cfg.model_copy(update={"level": level})
        tag = f"{label.replace(' ', '-')}-{level}" + ("-retry" if retried else "")
        recorded = (
            None
            if retried
            else recorded_pair(case, ledger, ws, base, cfg, label, on_status=on_status)
        )
        ta, tb = recorded or materialize_both(
            case, ws, tag, capture=cfg, timeout_s=timeout_s, progress=on_status
        )
        restart = next((o for o in (ta, tb) if o.step_restart), None)
        if restart is not None:
            ev = relaunch_evidence(
                [tb, ta],
                EvidenceKind.trace_compare,
                result=EvidenceResult.error,
                summary=f"{label}: run {restart.run}: {restart.step_restart}. Traces are not "
                "compared (they would pair different steps); make the script restore its step "
                "counter on resume, or call the tracer's step(n) with the global step",
            )
            ledger.add_evidence(ev)
            return None, ev
        failed = [o for o in (ta, tb) if not o.ok]
        problems = perturbation(base, (ta, tb), is_repeat(case))
        if not problems and ta.trace_dir and tb.trace_dir:
            break
        if failed and not retried:
            # A crashed relaunch is not evidence of perturbation: try the same level once more.
            ledger.note(
                f"{label} at {level} level: {'; '.join(problems)}; retrying once at the same level",
                level="warning",
            )
            retried = True
            continue
        ledger.note(
            f"{label} at {level} level is not usable: {'; '.join(problems)}; "
            "retrying with lighter capture",
            level="warning",
        )
        level, retried = LIGHTER.get(level), False
        cfg = cfg.model_copy(update={"dump": []})
    else:
        ev = Evidence(
            kind=EvidenceKind.trace_compare,
            result=EvidenceResult.error,
            summary=f"{label}: no capture level gave a usable trace (failed or perturbed the run, see the notes); no trace comparison is trustworthy",
        )
        ledger.add_evidence(ev)
        return None, ev
    try:
        res = compare_paths(
            ta.trace_dir, tb.trace_dir, mapping=case.correspondence_map, executor=ctx.executor
        )
    except TriageError as exc:
        # e.g. the window never occurred in a process (a resumed script that counts its
        # steps from 0): say why, with what the capture itself reported
        said = [w for o in (ta, tb) for w in o.warnings][:6]
        ev = relaunch_evidence(
            [tb, ta],
            EvidenceKind.trace_compare,
            result=EvidenceResult.error,
            summary=f"{label} ({level}): the traces cannot be compared: {exc}"
            + (f"; the capture said: {' | '.join(said)}" if said else ""),
        )
        ledger.add_evidence(ev)
        return None, ev
    ctx.saw(res)
    arts = [
        ledger.artifact(p, role=f"trace {out.run}")
        for out in (ta, tb)
        for p in sorted(Path(out.trace_dir).glob("trace_rank*.jsonl"))
    ]
    origin = _origin(res)
    if res.status == "identical":
        summary = f"{label} ({level}): traced runs identical over steps {cfg.steps}, although their untraced bits differ at step {rep.step}: the capture hides the divergence or the window misses it"
        result = EvidenceResult.inconclusive
    elif origin is not None:
        summary = f"{label} ({level}): first divergence with equal inputs and different outputs at {_where(origin.b or origin.a)}; origin ranks {res.summary.origin_ranks}, receiver-only ranks {res.summary.receiver_only_ranks}"
        result = EvidenceResult.observed
    else:
        summary = f"{label} ({level}): {headline(res)}"
        result = EvidenceResult.observed
    unmatched = sum(r.unmatched_total for r in res.ranks)
    if unmatched:
        summary += f"; {unmatched} unmatched event(s), listed in the evidence data"
    if not res.complete:
        summary += f"; INCOMPLETE comparison: {'; '.join(res.warnings)}"
        if res.status == "identical":
            result = EvidenceResult.inconclusive
    widen = next((r.outside_scope for r in res.ranks if r.outside_scope), None)
    ev = relaunch_evidence(
        [tb, ta],
        EvidenceKind.trace_compare,
        result=result,
        summary=summary,
        artifacts=arts,
        data=TraceCompareData(
            level=level,
            steps=list(cfg.steps) if cfg.steps else None,
            rows=_rows(res, f"{label}/{level}"),
            origin=origin.model_dump(mode="json") if origin else None,
            origin_location=_where(origin.b or origin.a) if origin else None,
            first_location=_where(_earliest(res).ref) if _earliest(res) else None,
            candidates=[c.model_dump(mode="json") for c in _extra_calls(res)[:50]],
            widen=widen.model_dump(exclude_none=True) if widen else None,
            summary=res.summary.model_dump(mode="json"),
            trace_dirs={"a": ta.trace_dir, "b": tb.trace_dir},
            complete=res.complete,
            warnings=res.warnings,
            unmatched=[
                {
                    "rank": r.rank,
                    "reason": u.reason,
                    "other_index": u.other_index,
                    **u.event.model_dump(
                        include={"run", "index", "step", "kind", "scope", "name", "call"}
                    ),
                }
                for r in res.ranks
                for u in r.unmatched[:50]
            ],
        ),
    )
    return res, _as_held(ctx.ledger, ev)


def _as_held(ledger: Ledger, ev: Evidence) -> Evidence:
    """``ev`` under the id of the comparison of the same traces the ledger already holds, if
    any: a run resumed inside stage 2 compares the cached traces again, and its record then
    updates the one made before the interruption instead of adding a second one."""
    d = ev.data_as(TraceCompareData)
    key = (d.trace_dirs, d.level, d.steps)
    for e in ledger.state().evidence:
        held = e.data if isinstance(e.data, TraceCompareData) else None
        if held and e.id != ev.id and (held.trace_dirs, held.level, held.steps) == key:
            return ev.model_copy(update={"id": e.id})
    return ev


class Stage2Result(BaseModel):
    """What stage 2 concluded, as the engine reads it (never string keys of evidence data)."""

    step: int = Field(description="the first mismatching step the window was chosen for")
    window: tuple[int, int] = Field(description="the steps of the trace that concluded")
    evidence: Evidence = Field(description="the trace comparison that concluded the stage")
    origin: EventRef | None = Field(
        default=None, description="first event with equal inputs and different outputs"
    )
    origin_location: str | None = None
    first_location: str | None = Field(
        default=None, description="the earliest difference of any role, when there is no origin"
    )
    origin_hypothesis: str | None = Field(
        default=None, description="the hypothesis derived from the origin itself"
    )
    explains: list[str] = Field(
        default_factory=list,
        description="supported hypotheses whose category or site explains the origin",
    )
    widen: Widen | None = None
    arises_at: int | None = Field(
        default=None,
        description="the earliest step whose traced events differ, every traced step before "
        "it matching, when no origin was found in it",
    )
    arises_phase: str | None = Field(
        default=None, description="the phase of that step's first differing event"
    )
    arises_role: str | None = Field(
        default=None, description="receiver or structural: how that event differs"
    )
    first_step: int | None = Field(default=None, description="the runs' first logged step")
    searched: list[int] = Field(
        default_factory=list, description="single steps traced while moving the window back"
    )
    extra_calls: list[Candidate] = Field(
        default_factory=list,
        description="events one run executes and the other does not, in every trace of the stage",
    )
    receivers: list[Divergence] = Field(
        default_factory=list,
        description="each rank's first receiver when no origin was found, with the producer "
        "of each differing input in both runs",
    )

    @property
    def unproduced(self) -> list[Producer]:
        """Differing inputs of the first receivers that no traced event of their run wrote:
        values from before the window, whose producer a longer trace can find."""
        return unproduced_inputs(self.receivers)

    @property
    def failed(self) -> bool:
        return self.evidence.result == EvidenceResult.error

    def next_action(self) -> str:
        """What to do next, in sentences, when no hypothesis explains what was found."""
        if self.failed:
            return f"the trace step failed ({self.evidence.id}): {self.evidence.summary}"
        if self.arises_at is not None:
            return _arises_text(self)
        if self.widen is not None:
            return widen_sentences(self.widen)
        return ""


def _arises_text(r: Stage2Result) -> str:
    """Where the difference arises, when no origin was traced there, and what to look at."""
    s, phase, first = r.arises_at, r.arises_phase or "?", r.first_step
    assert s is not None
    in_init = first is not None and s < first
    when = f"initialisation (before step {first})" if in_init else f"step {s}"
    before = (
        f"Every traced step before step {s} matched. " if first is not None and s > first else ""
    )
    if r.arises_role in ("extra", "missing"):
        return (
            f"{before}In {when} one run executes {r.first_location} and the other does not: "
            "that call is the first difference. Remove it (or make it side-effect free) in the "
            "run that makes it and compare again."
        )
    if in_init or (phase == "forward" and not before):
        return (
            f"The first difference arises in {when if in_init else 'the first step'}: "
            f"{r.first_location} already receives different inputs. Compare both runs' state "
            "after initialisation (parameters, optimizer state, step counters, RNG streams) and "
            "the first batch."
        )
    if phase == "forward":
        return (
            f"{before}Step {s} already receives different inputs: the difference arises at the "
            f"boundary between steps {s - 1} and {s}, outside the traced events (data loader, "
            "RNG, state loaded or written between steps). Compare both runs' state there."
        )
    return (
        f"{before}In step {s} the first difference is a {phase} event receiving different "
        "inputs that no traced event produced: the difference arises in code outside every "
        "module and op the trace saw (a gradient hook, a clip, a custom kernel). Capture below "
        "the dispatcher or add a reproducer for that code."
    )


def widen_sentences(w: Widen) -> str:
    """The comparator's advice on what to capture next, as sentences a person reads."""
    return w.sentences()


def _starts_different(res: CompareResult, window: tuple[int, int]) -> bool:
    """No origin, and the earliest difference is an event of the window's first step that
    receives different inputs: what made them differ may lie before the window."""
    if _origin(res) is not None:
        return False
    first = _earliest(res)
    return first is not None and first.role == "receiver" and first.ref.step <= window[0]


def _module_cfg(ws: Path, window: tuple[int, int]) -> CaptureConfig:
    return CaptureConfig(out_dir=ws / "unused", steps=window, level="module")


def _search_back(
    ctx: _Ctx, hi: int, first: int, found: tuple[CompareResult, Evidence]
) -> tuple[CompareResult, Evidence, int, list[int], bool]:
    """Bisect single steps in [first, hi) at module level for the earliest differing step.
    ``hi``'s first difference already receives different inputs; ``found`` is its comparison.

    Returns the comparison to go on with, its step, the steps traced, and whether the search
    finished. Out of budget or on a failed trace it stops with the earliest differing step
    seen so far, which then is not known to be the earliest.
    """
    lo, searched = first, []
    res, ev = found
    while lo < hi:
        if time.monotonic() >= ctx.deadline:
            ctx.ledger.note(
                f"budget reached while moving the trace window back (steps {lo}..{hi - 1} "
                "not searched); `triage run --budget-minutes M` resumes with more time",
                level="warning",
            )
            return res, ev, hi, searched, False
        mid = (lo + hi) // 2
        searched.append(mid)
        r, e = trace_and_compare(ctx, _module_cfg(ctx.ws, (mid, mid)), f"window step {mid}")
        if r is None:
            return res, ev, hi, searched, False  # the failure is recorded
        ctx.ledger.add_evidence(e)
        if r.status == "identical":
            lo = mid + 1
        elif _starts_different(r, (mid, mid)):
            hi, res, ev = mid, r, e
        else:
            return r, e, mid, searched, True  # the difference arises inside step mid
    return res, ev, hi, searched, True


def run_stage2(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    supported: list[Hypothesis],
    *,
    timeout_s: float,
    deadline: float = float("inf"),
    on_status: Callable[[str], None] = lambda s: None,
    executor: Executor | None = None,
) -> Stage2Result:
    """``executor``: where each trace comparison's ranks are compared (the result is the
    same on any)."""
    assert rep.step is not None
    st = ledger.state()
    mark = done_for(st, "trace", rep.step)
    if mark is not None and mark.get("result"):
        prior = Stage2Result.model_validate(mark["result"])
        latest = {e.id: e for e in st.evidence}.get(prior.evidence.id, prior.evidence)
        return prior.model_copy(update={"evidence": latest})
    ws = Path(ledger.workspace)
    ctx = new_context(
        case,
        ledger,
        rep,
        timeout_s=timeout_s,
        deadline=deadline,
        on_status=on_status,
        executor=executor,
    )
    n = rep.step
    first_step = rep.diff.common_steps[0] if rep.diff.common_steps else 0
    window = (max(n - 1, first_step), n)
    res, ev = trace_and_compare(ctx, _module_cfg(ws, window), "module trace")
    searched: list[int] = []
    searched_all = True
    if res is not None and _starts_different(res, window) and window[0] > first_step:
        ledger.add_evidence(ev)
        on_status(f"step {window[0]} already receives different inputs: moving the window back")
        res, ev, at, searched, searched_all = _search_back(ctx, window[0], first_step, (res, ev))
        window = (at, at)
    final = ev
    origin = _origin(res) if res else None
    arises: Earliest | None = None
    edge = window[0]  # a difference arising at or before this step came from before it
    first_d = _earliest(res) if res else None
    if res is not None and origin is None:
        # Nothing in the modules (or modules identical while the metric bits differ: the
        # difference is in code outside every module, a loss function, a clip, the data):
        # capture ATen ops over the whole step where the first difference appeared.
        first = _earliest(res)
        step = max(first.ref.step, window[0]) if first else window[1]
        # A loss at step N reflects updates 0..N-1: when step N's forward already reads
        # different inputs and the step before matched at module level, the update that made
        # them differ ran outside every module (a hand-written optimizer, a clip): trace it too.
        upstream = first is not None and first.role == "receiver" and first.ref.phase == "forward"
        lo = max(step - 1 if upstream else step, window[0])
        edge = step
        ledger.add_evidence(ev.model_copy(update={"hypotheses": [h.id for h in supported]}))
        op_cfg = CaptureConfig(out_dir=ws / "unused", steps=(lo, step), level="op", digest="both")
        res2, ev2 = trace_and_compare(ctx, op_cfg, "whole-step op trace")
        origin = _origin(res2) if res2 else None
        if origin is None and searched_all:
            arises = (_earliest(res2) if res2 else None) or first
        res, ev, final, window = res2, ev2, ev2, (lo, step)
        first_d = (_earliest(res2) if res2 else None) or first_d
    if origin is not None and (origin.b or origin.a).kind == "module":
        origin, res, ev, final = _narrow_to_ops(ctx, origin, res, ev, supported)
    explained: list[str] = []
    if origin is not None:
        explained = _cross_check(ledger, origin, ev, supported)
    if ev is not None and res is not None:
        ev.data_as(TraceCompareData).explains = explained
        ev.hypotheses = [h.id for h in supported]
        ledger.add_evidence(ev)
        final = ev
    hyp = None
    if origin is not None:
        confirm = _byte_confirm(ledger, origin, final)
        hyp = _origin_hypothesis(ledger, origin, supported, explained, final, confirm)
    widen = next((r.outside_scope for r in res.ranks if r.outside_scope), None) if res else None
    ref = (origin.b or origin.a) if origin else None
    out = Stage2Result(
        step=n,
        window=window,
        evidence=final,
        origin=ref,
        origin_location=_where(ref) if ref else None,
        first_location=_where(first_d.ref) if first_d else None,
        origin_hypothesis=hyp.id if hyp else None,
        explains=explained,
        widen=widen,
        arises_at=arises.ref.step if arises and arises.ref.step <= edge else None,
        arises_phase=arises.ref.phase if arises and arises.ref.step <= edge else None,
        arises_role=arises.role if arises and arises.ref.step <= edge else None,
        first_step=first_step,
        searched=searched,
        extra_calls=ctx.extra_calls[:20],
        receivers=first_receivers(res) if res is not None and origin is None else [],
    )
    ledger.stage(
        "trace",
        "done",
        step=n,
        evidence=final.id,
        result=out.model_dump(mode="json", exclude={"evidence": {"data"}}),
    )
    return out


def _narrow_to_ops(
    ctx: _Ctx,
    origin: Divergence,
    res: CompareResult | None,
    ev: Evidence,
    supported: list[Hypothesis],
) -> tuple[Divergence, CompareResult | None, Evidence, Evidence]:
    """Op level inside the implicated module, with that module's ops dumped.

    Returns (origin, comparison, evidence to cross-check, final evidence). An op trace that
    failed is an error on record, not a negative result: the module-level origin stands,
    un-narrowed, and the ledger says why.
    """
    ref = origin.b or origin.a
    scope_re = "^" + re.escape(ref.scope) + r"(\.|$)"
    # Order-sensitive digests too: an XOR digest of a 0/1 mask is only its parity.
    op_cfg = CaptureConfig(
        out_dir=ctx.ws / "unused",
        steps=(ref.step, ref.step),
        level="op",
        scope=scope_re,
        dump=[f"{ref.scope}:*", f"{ref.scope}.*:*"],
        digest="both",
    )
    ctx.ledger.add_evidence(ev.model_copy(update={"hypotheses": [h.id for h in supported]}))
    res2, ev2 = trace_and_compare(ctx, op_cfg, "op trace")
    o2 = _origin(res2) if res2 else None
    if o2 is not None:
        return o2, res2, ev2, ev2
    if res2 is None:
        ctx.ledger.note(
            f"the op trace inside {ref.scope or '<root>'} failed ({ev2.id}): the module-level "
            f"origin {_where(ref)} stands, not narrowed to an op",
            level="warning",
        )
    else:
        ev2.summary += (
            "; op level shows no origin inside the module: the module-level origin stands"
        )
        ctx.ledger.add_evidence(ev2)
    # the module-level evidence is recorded again by the caller, with its cross-check
    return origin, res, ev, ev


def _cross_check(
    ledger: Ledger, origin: Divergence, ev: Evidence, supported: list[Hypothesis]
) -> list[str]:
    """Which supported hypotheses explain the origin; the generator state it drew from."""
    ref = origin.b or origin.a
    meta_a, meta_b = _meta(origin.a), _meta(origin.b)
    rng_differs = None
    if meta_a.get("rng") and meta_b.get("rng"):
        rng_differs = meta_a["rng"] != meta_b["rng"]
        ev.summary += (
            f"; the generator state it drew from differs ({meta_a['rng']} vs {meta_b['rng']})"
            if rng_differs
            else "; the generator state it drew from is equal in both runs"
        )
        ev.data_as(TraceCompareData).rng_state = {"a": meta_a["rng"], "b": meta_b["rng"]}
    site = EventSite.of(ref, rng_differs)
    st = ledger.state()
    explained = []
    for h in supported:
        findings = [st.findings[f] for f in h.findings if f in st.findings]
        ok = explains(h.category, findings, site)
        if ok:
            explained.append(h.id)
        ledger.note(
            f"trace cross-check: {h.id} ({h.category}) {'explains' if ok else 'does NOT explain'} "
            f"the first divergence at {_where(ref)}"
        )
    return explained


def _meta(ref: EventRef | None) -> dict:
    """The origin event's ``meta`` as written in its trace file (the comparator keeps digests)."""
    if ref is None or ref.line < 1:
        return {}
    try:
        with open(ref.file) as f:
            for i, line in enumerate(f, start=1):
                if i == ref.line:
                    return json.loads(line).get("meta", {}) or {}
    except (OSError, json.JSONDecodeError):
        return {}
    return {}


def _byte_confirm(ledger: Ledger, origin: Divergence, trace_ev: Evidence) -> Evidence | None:
    if not (origin.a and origin.b and origin.a.dump and origin.b.dump):
        return None
    dirs = trace_ev.data_as(TraceCompareData).trace_dirs
    pa = Path(dirs.get("a", "")) / origin.a.dump
    pb = Path(dirs.get("b", "")) / origin.b.dump
    if not (pa.exists() and pb.exists()):
        return None
    rep = confirm_bytes(pa, pb)
    ev = Evidence(
        kind=EvidenceKind.byte_compare,
        result=EvidenceResult.observed,
        summary=f"bytes of {origin.b.scope}::{origin.b.name}: {byte_sentences(rep)}",
        data=ByteCompareData.model_validate(rep.model_dump(mode="json")),
        artifacts=[ledger.artifact(pa, "dump a"), ledger.artifact(pb, "dump b")],
    )
    ledger.add_evidence(ev)
    return ev


def byte_sentences(rep: ByteReport) -> str:
    """A byte comparison said as a person reads it (the full report stays in the data)."""
    if rep.equal:
        return f"all {len(rep.tensors)} tensor(s) are bit-identical"
    parts = []
    for t in rep.tensors:
        if t.equal:
            continue
        ulp = f", at most {t.max_ulp} ulp apart" if t.max_ulp is not None else ""
        at = f", first at index {t.first_indices[0]}" if t.first_indices else ""
        parts.append(
            f"{t.name} ({t.dtype}{list(t.shape)}): {t.differing} of {t.numel} elements differ{ulp}{at}"
        )
    same = len(rep.tensors) - len(parts)
    return (
        "; ".join(parts[:4])
        + (f"; {len(parts) - 4} more differ" if len(parts) > 4 else "")
        + (f"; {same} other tensor(s) bit-identical" if same else "")
    )


def _origin_hypothesis(
    ledger: Ledger,
    origin: Divergence,
    supported: list[Hypothesis],
    explained: list[str],
    trace_ev: Evidence,
    byte_ev: Evidence | None,
) -> Hypothesis | None:
    """When no supported hypothesis explains the origin, the origin itself becomes one."""
    if explained:
        return None
    ref = origin.b or origin.a
    op = parse_op(ref.name) if ref.kind == "op" else None
    if op is not None and op.base in RANDOM_OPS:
        category, stmt = (
            "rng-state",
            f"the random op {ref.scope}::{ref.name} draws different random numbers in the two runs (its inputs are equal, its output is not)",
        )
    elif op is not None and op.base in ATOMIC_OPS:
        category, stmt = (
            "nondeterminism",
            f"{ref.scope}::{ref.name} is nondeterministic: equal inputs give different outputs",
        )
    else:
        category, stmt = (
            "unknown",
            f"{ref.scope}::{ref.name} gives different outputs on equal inputs",
        )
    hyp = Hypothesis(
        statement=f"{stmt} (first divergence: {_where(ref)})",
        category=category,
        classification=CLASSIFICATION.get(category, Classification.unknown),
    )
    ledger.put_hypothesis(hyp)
    evidence = [trace_ev.id] + ([byte_ev.id] if byte_ev else [])
    ledger.add_evidence(
        Evidence(
            hypotheses=[hyp.id],
            kind=EvidenceKind.note,
            result=EvidenceResult.observed,
            summary=f"hypothesis derived from the trace origin ({', '.join(evidence)}); it needs a replay or a policy rerun to be supported",
        )
    )
    replay = _replay(ledger, hyp, origin, trace_ev)
    if replay is not None and replay.result == EvidenceResult.supported:
        hyp = ledger.update_hypothesis(
            hyp.id, status=HypothesisStatus.supported, reason=BY_LATEST_TEST
        )
    return hyp


def _replay(
    ledger: Ledger, hyp: Hypothesis, origin: Divergence, trace_ev: Evidence
) -> Evidence | None:
    """Replay the origin op on its dumped inputs: as captured, then under deterministic algorithms.

    Supports a nondeterminism hypothesis when equal inputs give varying outputs as captured
    and identical outputs with deterministic algorithms. A seeded (random) op is not
    replayed: its output depends on a generator state the dump does not hold.
    """
    from reproducers.replay import ReplayPolicy, replay_dump

    ref = origin.b or origin.a
    if not ref.dump:
        ledger.note(f"no tensor dump for {ref.scope}::{ref.name}: replay skipped")
        return None
    if hyp.category == "rng-state":
        ledger.note(
            f"{ref.name} is a random op: a replay cannot hold its generator state; the policy rerun tests it"
        )
        return None
    dirs = trace_ev.data_as(TraceCompareData).trace_dirs
    dump = Path(dirs["b"]) / ref.dump
    roots = [ledger.workspace, *dirs.values()]
    try:
        as_is = replay_dump(dump, ledger.workspace, repeats=8, hypotheses=[hyp.id], roots=roots)
    except InputError as exc:
        # a dump that cannot be replayed (no inputs, an op with hidden arguments) is a gap
        # in the evidence, said in the ledger, not the end of the workflow
        ledger.note(f"replay of {ref.scope}::{ref.name} not possible: {exc}", level="warning")
        return None
    if as_is.data_as(ReplayData).repeatable is not False:
        return as_is
    det = replay_dump(
        dump,
        ledger.workspace,
        repeats=8,
        policy=ReplayPolicy(deterministic=True),
        hypotheses=[hyp.id],
        roots=roots,
    )
    ok = bool(det.data_as(ReplayData).repeatable)
    ev = Evidence(
        hypotheses=[hyp.id],
        kind=EvidenceKind.replay,
        # Supported only when the one changed policy removes the variation as well.
        result=EvidenceResult.supported if ok else EvidenceResult.inconclusive,
        summary=(
            f"{ref.name} on its captured inputs gave {as_is.data_as(ReplayData).distinct_runs} distinct outputs in 8 runs ({as_is.id}); "
            + (
                "with deterministic algorithms every run was identical"
                if ok
                else f"with deterministic algorithms: {det.summary}"
            )
            + f" ({det.id})"
        ),
        data=ReplayData(as_captured=as_is.id, deterministic=det.id, deterministic_repeatable=ok),
    )
    ledger.add_evidence(ev)
    return ev

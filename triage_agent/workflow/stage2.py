"""Stage 2: relaunch both runs with tracing over [N-1, N], compare, narrow, confirm, replay.

Module level first (forward outputs, gradients, collectives, optimizer state); then op level
inside the implicated scope with the origin's tensors dumped, when the module origin is not
a leaf. Every traced relaunch is checked against its untraced baseline: if the capture
changed the run's own metric bits, or made the divergence disappear, the ledger says so and
the stage retries with lighter capture instead of reporting a clean result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..compare import CompareResult, compare_runs, confirm_bytes, load_runs
from ..compare.result import Divergence, EventRef
from ..errors import InputError, TriageError
from ..fingerprint import CaptureConfig
from ..ledger import Ledger
from ..metrics import diff_metrics, load_metrics
from ..records import (
    Case,
    Classification,
    Evidence,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    HypothesisStatus,
)
from ..runs import RunOutcome, joined_argv, materialize, materialize_case
from .characterize import MismatchReport
from .classify import _ATOMIC_OPS, _RANDOM_OPS, CLASSIFICATION, explains

LIGHTER = {"op": "module", "module": "collective", "collective": None}


def _pair(
    case: Case, ws: Path, label: str, cfg: CaptureConfig, timeout_s: float, on_status
) -> tuple[RunOutcome, RunOutcome]:
    with ThreadPoolExecutor(2) as pool:
        fa = pool.submit(
            materialize, case.run_a, ws, label, capture=cfg, timeout_s=timeout_s, progress=on_status
        )
        fb = pool.submit(
            materialize, case.run_b, ws, label, capture=cfg, timeout_s=timeout_s, progress=on_status
        )
        return fa.result(), fb.result()


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


def is_repeat(case: Case) -> bool:
    """A and B are the same command: any difference between them is run-to-run."""
    return case.run_a.model_dump(exclude={"name"}) == case.run_b.model_dump(exclude={"name"})


def _perturbation(
    ledger: Ledger, base: dict[str, str], traced: tuple[RunOutcome, RunOutcome], repeat: bool
) -> list[str]:
    """Compare each traced run's metric bits with its untraced baseline's.

    For a repeat case the baselines already show that one command does not reproduce its
    own bits, so a traced run differing from its baseline says nothing about the capture;
    there the check is that the traced pair still diverges (see trace_and_compare).
    """
    problems = []
    for out in traced:
        if not out.ok or out.metrics is None:
            problems.append(
                f"traced run {out.run} failed (exit codes {out.exit_codes}; logs {out.logs[-1:]})"
            )
            continue
        if repeat:
            continue
        d = diff_metrics(load_metrics(base[out.run]), load_metrics(out.metrics))
        if d.first_step is not None:
            problems.append(
                f"tracing changed run {out.run}'s own metric bits from step {d.first_step}"
            )
        elif not d.complete:
            problems.append(f"traced run {out.run} stopped short of its baseline ({d.gaps()})")
    return problems


def trace_and_compare(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    cfg: CaptureConfig,
    label: str,
    base: dict[str, str],
    timeout_s: float,
    on_status: Callable[[str], None],
) -> tuple[CompareResult | None, Evidence]:
    ws = Path(ledger.workspace)
    level: str | None = cfg.level
    retried = False
    while level is not None:
        on_status(f"{label}: tracing both runs at {level} level, steps {cfg.steps}")
        cfg = cfg.model_copy(update={"level": level})
        tag = f"{label.replace(' ', '-')}-{level}" + ("-retry" if retried else "")
        ta, tb = _pair(case, ws, tag, cfg, timeout_s, on_status)
        restart = next((o for o in (ta, tb) if o.step_restart), None)
        if restart is not None:
            ev = Evidence(
                kind=EvidenceKind.trace_compare,
                result=EvidenceResult.error,
                summary=f"{label}: run {restart.run}: {restart.step_restart}. Traces are not "
                "compared (they would pair different steps); make the script restore its step "
                "counter on resume, or call the tracer's step(n) with the global step",
                argv=joined_argv(restart),
            )
            ledger.add_evidence(ev)
            return None, ev
        failed = [o for o in (ta, tb) if not o.ok]
        problems = _perturbation(ledger, base, (ta, tb), is_repeat(case))
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
        res = compare_runs(*load_runs(ta.trace_dir, tb.trace_dir), mapping=case.correspondence_map)
    except TriageError as exc:
        # e.g. the window never occurred in a process (a resumed script that counts its
        # steps from 0): say why, with what the capture itself reported
        said = [w for o in (ta, tb) for w in o.warnings][:6]
        ev = Evidence(
            kind=EvidenceKind.trace_compare,
            result=EvidenceResult.error,
            summary=f"{label} ({level}): the traces cannot be compared: {exc}"
            + (f"; the capture said: {' | '.join(said)}" if said else ""),
            argv=joined_argv(tb),
        )
        ledger.add_evidence(ev)
        return None, ev
    argv = joined_argv(tb)
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
        first = _first(res)
        summary = f"{label} ({level}): runs diverge but no origin lies on the traced events (outside the capture scope on ranks {res.summary.outside_scope_ranks})"
        if first is not None:
            summary += f"; the first difference is a {first.role} at {_where(first.b or first.a)}"
        result = EvidenceResult.observed
    unmatched = sum(r.unmatched_total for r in res.ranks)
    if unmatched:
        summary += f"; {unmatched} unmatched event(s), listed in the evidence data"
    if not res.complete:
        summary += f"; INCOMPLETE comparison: {'; '.join(res.warnings)}"
        if res.status == "identical":
            result = EvidenceResult.inconclusive
    widen = next((r.outside_scope for r in res.ranks if r.outside_scope), None)
    ev = Evidence(
        kind=EvidenceKind.trace_compare,
        result=result,
        summary=summary,
        argv=argv,
        artifacts=arts,
        data={
            "level": level,
            "steps": list(cfg.steps) if cfg.steps else None,
            "rows": _rows(res, f"{label}/{level}"),
            "origin": origin.model_dump(mode="json") if origin else None,
            "origin_location": _where(origin.b or origin.a) if origin else None,
            "first_location": _where(_first(res).b or _first(res).a) if _first(res) else None,
            "widen": widen.model_dump_json(exclude_none=True) if widen else None,
            "summary": res.summary.model_dump(mode="json"),
            "trace_dirs": {"a": ta.trace_dir, "b": tb.trace_dir},
            "complete": res.complete,
            "warnings": res.warnings,
            "unmatched": [
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
        },
    )
    return res, ev


def run_stage2(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    supported: list[Hypothesis],
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> tuple[Evidence | None, Hypothesis | None]:
    st = ledger.state()
    prior = [
        e
        for e in st.evidence
        if e.kind == EvidenceKind.trace_compare and e.result != EvidenceResult.error
    ]
    done = [x for x in st.stages if x["stage"] == "trace" and x.get("status") == "done"]
    if done and prior:
        mark = done[-1]
        final = next((e for e in prior if e.id == mark.get("evidence")), prior[-1])
        return final, st.hypotheses.get(mark.get("origin_hypothesis") or "")
    ws = Path(ledger.workspace)
    base = {o.run: o.metrics for o in materialize_case(case, ws)}
    n = rep.step
    window = (max(n - 1, 0), n)
    cfg = CaptureConfig(out_dir=ws / "unused", steps=window, level="module")
    res, ev = trace_and_compare(case, ledger, rep, cfg, "module trace", base, timeout_s, on_status)
    final = ev
    origin = _origin(res) if res else None
    if res is not None and origin is None:
        # Nothing in the modules (or modules identical while the metric bits differ: the
        # difference is in code outside every module, a loss function, a clip): capture
        # ATen ops over the whole step where the first difference appeared.
        first = _first(res)
        step = (first.b or first.a).step if first else n
        ledger.add_evidence(ev.model_copy(update={"hypotheses": [h.id for h in supported]}))
        op_cfg = CaptureConfig(out_dir=ws / "unused", steps=(step, step), level="op", digest="both")
        res2, ev2 = trace_and_compare(
            case, ledger, rep, op_cfg, "whole-step op trace", base, timeout_s, on_status
        )
        origin = _origin(res2) if res2 else None
        res, ev, final = res2, ev2, ev2
    if origin is not None:
        ref = origin.b or origin.a
        if ref.kind == "module":
            # Narrow: op level inside the implicated module, with that module's ops dumped.
            scope_re = "^" + re.escape(ref.scope) + r"(\.|$)"
            # Order-sensitive digests too: an XOR digest of a 0/1 mask is only its parity.
            op_cfg = CaptureConfig(
                out_dir=ws / "unused",
                steps=(ref.step, ref.step),
                level="op",
                scope=scope_re,
                dump=[f"{ref.scope}:*", f"{ref.scope}.*:*"],
                digest="both",
            )
            ledger.add_evidence(ev.model_copy(update={"hypotheses": [h.id for h in supported]}))
            res2, ev2 = trace_and_compare(
                case, ledger, rep, op_cfg, "op trace", base, timeout_s, on_status
            )
            o2 = _origin(res2) if res2 else None
            if o2 is not None:
                origin, ev, final = o2, ev2, ev2
            else:
                ev2.summary += (
                    "; op level shows no origin inside the module: the module-level origin stands"
                )
                ledger.add_evidence(ev2)
                ev = (
                    final  # the module-level evidence is recorded again below, with its cross-check
                )
    explained = []
    if origin is not None:
        ref = origin.b or origin.a
        meta_a, meta_b = _meta(origin.a), _meta(origin.b)
        event = {"name": ref.name, "scope": ref.scope, "kind": ref.kind, "meta": {}}
        if meta_a.get("rng") and meta_b.get("rng"):
            differs = meta_a["rng"] != meta_b["rng"]
            event["meta"]["rng_differs"] = differs
            if ev is not None:
                ev.summary += (
                    f"; the generator state it drew from differs ({meta_a['rng']} vs {meta_b['rng']})"
                    if differs
                    else "; the generator state it drew from is equal in both runs"
                )
                ev.data["rng_state"] = {"a": meta_a["rng"], "b": meta_b["rng"]}
        explained = [h.id for h in supported if explains(h.category, event)]
        for h in supported:
            verdict_text = "explains" if h.id in explained else "does NOT explain"
            ledger.note(
                f"trace cross-check: {h.id} ({h.category}) {verdict_text} the first divergence at {_where(ref)}"
            )
    if ev is not None and res is not None:
        ev.data["explains"] = explained
        ev.hypotheses = [h.id for h in supported]
        ledger.add_evidence(ev)
        final = ev
    hyp = None
    if origin is not None:
        confirm = _byte_confirm(ledger, origin, final)
        hyp = _origin_hypothesis(ledger, origin, supported, explained, final, confirm)
    ledger.stage("trace", "done", evidence=final.id, origin_hypothesis=hyp.id if hyp else None)
    return final, hyp


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
    dirs = trace_ev.data.get("trace_dirs", {})
    pa = Path(dirs.get("a", "")) / origin.a.dump
    pb = Path(dirs.get("b", "")) / origin.b.dump
    if not (pa.exists() and pb.exists()):
        return None
    rep = confirm_bytes(pa, pb)
    ev = Evidence(
        kind=EvidenceKind.byte_compare,
        result=EvidenceResult.observed,
        summary=f"bytes of {origin.b.scope}::{origin.b.name}: {rep.model_dump_json()[:400]}",
        data=rep.model_dump(mode="json"),
        artifacts=[ledger.artifact(pa, "dump a"), ledger.artifact(pb, "dump b")],
    )
    ledger.add_evidence(ev)
    return ev


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
    name = f"{ref.scope} {ref.name}"
    if _RANDOM_OPS.search(name):
        category, stmt = (
            "rng-state",
            f"the random op {ref.scope}::{ref.name} draws different random numbers in the two runs (its inputs are equal, its output is not)",
        )
    elif _ATOMIC_OPS.search(name):
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
        hyp = ledger.update_hypothesis(hyp.id, status=HypothesisStatus.supported)
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
    dump = Path(trace_ev.data["trace_dirs"]["b"]) / ref.dump
    roots = [ledger.workspace, *trace_ev.data["trace_dirs"].values()]
    try:
        as_is = replay_dump(dump, ledger.workspace, repeats=8, hypotheses=[hyp.id], roots=roots)
    except InputError as exc:
        # a dump that cannot be replayed (no inputs, an op with hidden arguments) is a gap
        # in the evidence, said in the ledger, not the end of the workflow
        ledger.note(f"replay of {ref.scope}::{ref.name} not possible: {exc}", level="warning")
        return None
    if as_is.data.get("repeatable", True):
        return as_is
    det = replay_dump(
        dump,
        ledger.workspace,
        repeats=8,
        policy=ReplayPolicy(deterministic=True),
        hypotheses=[hyp.id],
        roots=roots,
    )
    ok = bool(det.data.get("repeatable"))
    ev = Evidence(
        hypotheses=[hyp.id],
        kind=EvidenceKind.replay,
        # Supported only when the one changed policy removes the variation as well.
        result=EvidenceResult.supported if ok else EvidenceResult.inconclusive,
        summary=(
            f"{ref.name} on its captured inputs gave {as_is.data.get('distinct_runs')} distinct outputs in 8 runs ({as_is.id}); "
            + (
                "with deterministic algorithms every run was identical"
                if ok
                else f"with deterministic algorithms: {det.summary}"
            )
            + f" ({det.id})"
        ),
        data={"as_captured": as_is.id, "deterministic": det.id, "deterministic_repeatable": ok},
    )
    ledger.add_evidence(ev)
    return ev

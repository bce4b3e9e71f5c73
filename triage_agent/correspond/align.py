"""The alignment loop: prove each differing boundary's policy with one intervention on B.

From the comparison of A with B as launched: take the first differing (step, boundary),
the policy its evidence names, and the candidates B's own configuration surface offers for
it (:mod:`.candidates`), ranked by that policy. Rerun B with each in turn (on top of those
already proven), recapture, compare, and keep the first after which that boundary matches
and no earlier one differs: the policy is proven, and the next differing boundary, if any,
gets the same treatment. A boundary no candidate aligns within the budget stays "differs,
unproven", and the loop stops there: what follows it may be downstream of it. Every
attempt is rerun evidence in the ledger, on a hypothesis per differing boundary.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from ..errors import InputError
from ..evidence_data import RerunData
from ..interventions import describe, parse_intervention, rerun
from ..ledger import Ledger
from ..ledger_rules import BY_LATEST_TEST
from ..records import Case, Classification, EvidenceResult, Hypothesis, HypothesisStatus
from ..runs import RunOutcome, rerun_evidence
from .boundaries import build_table
from .candidates import candidates
from .mapping import load_side
from .model import (
    BOUNDARIES,
    Alignment,
    AlignRow,
    AlignStep,
    Attempt,
    BoundaryResult,
    Candidate,
    CompatTable,
    Mapping,
)

MAX_RERUNS = 6
MAX_MINUTES = 30.0


class Budget(BaseModel):
    reruns: int = Field(default=MAX_RERUNS, ge=0, description="reruns of B at most")
    minutes: float = Field(default=MAX_MINUTES, ge=0, description="wall minutes at most")


def _at(r: BoundaryResult | None) -> tuple[int, int] | None:
    return None if r is None else (r.step, BOUNDARIES.index(r.boundary))


def _said(r: BoundaryResult | None) -> str | None:
    return None if r is None else f"{r.boundary} at step {r.step}"


def capture_dir(o: RunOutcome, subdir: str) -> Path:
    d = Path(o.out_dir) / subdir
    if not (d / "side.json").is_file():
        raise InputError(f"no boundary capture at {d}: the run's launch must dump it there")
    return d


def _judge(
    target: BoundaryResult, launched: CompatTable, t: CompatTable | None, out: RunOutcome
) -> tuple[str, str]:
    if not out.ok or t is None:
        return "failed", out.error or "no capture"
    if (t.pairs, t.unmapped) != (launched.pairs, launched.unmapped):
        return "failed", f"{t.pairs} pairs, {t.unmapped} unmapped: the mapping changed"
    if t.steps <= target.step:
        return "failed", f"only {t.steps} steps captured"
    now, then = _at(t.first), _at(target)
    if now is None or now > then:  # type: ignore[operator]
        return "aligned", f"{_said(target)} matches; first difference now {_said(t.first)}"
    if now == then:
        n = len(t.first.differing) if t.first else 0
        return "still differs", f"{_said(target)} still differs ({n} tensors)"
    return "earlier boundary differs", f"{_said(t.first)} now differs, before {_said(target)}"


def _record(
    ledger: Ledger,
    hyp: str,
    c: Candidate,
    texts: list[str],
    outcome: str,
    detail: str,
    out: RunOutcome,
) -> str:
    result = {
        "aligned": EvidenceResult.supported,
        "failed": EvidenceResult.error,
    }.get(outcome, EvidenceResult.refuted)
    data = RerunData(
        interventions=texts,
        changed=[describe(parse_intervention(t)) for t in texts],
        applied_to="b",
        compared_with="a",
        error=out.error,
    )
    summary = (
        f"run b rerun with {describe(parse_intervention(c.intervention))} "
        f"({c.source}: {c.governs}), boundaries recaptured and compared with a: "
        f"{outcome}: {detail}"
    )
    ev = rerun_evidence(out, data, hypotheses=[hyp], result=result, summary=summary)
    return ledger.add_evidence(ev).id


def _rows(launched: CompatTable, aligned: CompatTable, walk: list[AlignStep]) -> list[AlignRow]:
    rows = []
    first = walk[0] if walk else None
    for r0, r1 in zip(launched.rows, aligned.rows, strict=True):
        mine = [s for s in walk if s.boundary == r0.boundary]
        policy = "; ".join(s.policy.name for s in mine if s.policy) or None
        proven = "; ".join(s.proven_by or "unproven" for s in mine) or None
        note = ""
        if r0.verdict == "differs" and not mine and first is not None:
            policy = f"downstream of {first.boundary} at step {first.step}"
            note = "matches once the proven policies are aligned" if r1.verdict == "match" else ""
        if r1.verdict == "differs" and not mine:
            note = "not reached: downstream of a difference left unproven"
        rows.append(
            AlignRow(
                boundary=r0.boundary,
                launched=r0.verdict,
                first_step=r0.first_step,
                policy=policy,
                proven_by=proven,
                aligned=r1.verdict,
                note=note,
            )
        )
    return rows


class AlignResult(BaseModel):
    alignment: Alignment
    mapping: Mapping
    a_dir: str
    b_dir: str = Field(description="B's capture as launched")
    aligned_b_dir: str = Field(description="B's capture with every proven intervention")


def align(
    case: Case,
    workspace: Path,
    a_dir: Path,
    b_dir: Path,
    given: list[str],
    *,
    budget: Budget | None = None,
    subdir: str = "boundaries",
    progress: Callable[[str], None] | None = None,
) -> AlignResult:
    """Walk the differing boundaries of A against B (B launched with ``given``), proving
    each one's policy with one intervention on B, within ``budget``."""
    budget = budget or Budget()
    say = progress or (lambda _m: None)
    ledger = Ledger(workspace)
    t0 = time.monotonic()
    launched, mapping = build_table(a_dir, b_dir, intervention="; ".join(given) or None)
    ma = load_side(a_dir)
    table, cur_b, kept = launched, b_dir, []
    walk: list[AlignStep] = []
    reruns, stopped = 0, "every boundary of every step matches"
    while table.first is not None:
        target, policy = table.first, table.policy
        mb = load_side(cur_b)
        hyp = ledger.put_hypothesis(
            Hypothesis(
                statement=f"{_said(target)} differs by a policy of B's that one intervention "
                f"on B aligns: {policy.name if policy else 'unnamed'}",
                category="policy",
                rationale=policy.detail if policy else "",
            )
        )
        step = AlignStep(
            step=target.step, boundary=target.boundary, policy=policy, hypothesis_id=hyp.id
        )
        walk.append(step)
        cands = (
            candidates(policy, target.boundary, target.step, ma, mb, case.run_b) if policy else []
        )
        say(f"{_said(target)}: {policy.name if policy else '?'}; {len(cands)} candidates")
        for c in cands:
            if c.intervention in kept:
                continue
            spent = time.monotonic() - t0
            if reruns >= budget.reruns or spent > budget.minutes * 60:
                stopped = f"budget spent ({reruns} reruns, {spent / 60:.1f} min)"
                break
            texts = [*given, *kept, c.intervention]
            try:
                ivs = [parse_intervention(t) for t in texts]
                say(f"  rerun b with {c.intervention} ({c.source}: {c.governs})")
                out = rerun(case, "b", ivs, workspace=workspace, timeout_s=case.timeout_s)
            except InputError as exc:
                step.attempts.append(Attempt(candidate=c, outcome="refused", detail=str(exc)))
                continue
            reruns += 1
            t = None
            if out.ok and (Path(out.out_dir) / subdir / "side.json").is_file():
                t, _ = build_table(a_dir, Path(out.out_dir) / subdir, intervention="; ".join(texts))
            outcome, detail = _judge(target, launched, t, out)
            ev = _record(ledger, hyp.id, c, texts, outcome, detail, out)
            step.attempts.append(
                Attempt(
                    candidate=c,
                    outcome=outcome,  # type: ignore[arg-type]
                    first_after=_said(t.first) if t else None,
                    detail=detail,
                    seconds=out.seconds,
                    evidence_id=ev,
                )
            )
            say(f"    {outcome}: {detail}")
            if outcome == "aligned" and t is not None:
                kept.append(c.intervention)
                step.proven_by = c.intervention
                ledger.update_hypothesis(
                    hyp.id,
                    evidence=[ev],
                    reason=BY_LATEST_TEST,
                    status=HypothesisStatus.supported,
                    classification=Classification.policy_difference,
                )
                table, cur_b = t, Path(out.out_dir) / subdir
                break
        if step.proven_by is None:
            tried_n = sum(a.outcome != "refused" for a in step.attempts)
            step.unproven_why = (
                stopped
                if stopped.startswith("budget")
                else f"none of the {tried_n} candidates tried aligned it"
                if tried_n
                else "no candidate on B's configuration surface governs it"
            )
            stopped = f"{_said(target)} unproven: {step.unproven_why}"
            break
    a_meta, b_meta = launched.a, launched.b
    return AlignResult(
        alignment=Alignment(
            a=a_meta,
            b=b_meta,
            steps=launched.steps,
            pairs=launched.pairs,
            unmapped=launched.unmapped,
            given=given,
            kept=kept,
            rows=_rows(launched, table, walk),
            walk=walk,
            launched=launched,
            aligned=table,
            reruns=reruns,
            seconds=round(time.monotonic() - t0, 1),
            stopped=stopped,
        ),
        mapping=mapping,
        a_dir=str(a_dir),
        b_dir=str(b_dir),
        aligned_b_dir=str(cur_b),
    )

"""Step 1-2: confirm the mismatch step from metric fingerprints and characterise the interval."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..errors import InputError
from ..evidence_data import MetricsData
from ..ledger import Ledger
from ..metrics import MetricDiff, diff_metrics, load_metrics, ulp_distance
from ..records import Case, Evidence, EvidenceKind, EvidenceResult, Provenance
from .declared import DeclaredDifference, declared_differences, positional_differences

Phase = Literal["first-step", "first-update", "resume", "gas-boundary", "multi-rank", "update"]


class MismatchReport(BaseModel):
    given_step: int | None
    step: int | None = Field(description="the first step whose metric bits differ (detected)")
    given_step_wrong: bool = False
    message: str
    diff: MetricDiff
    phases: list[Phase] = Field(default_factory=list, description="most specific first")
    facts: list[str] = Field(default_factory=list)
    ranks_differing: list[int] = Field(default_factory=list)
    source_differs: bool = False
    env_differs: dict[str, tuple[str | None, str | None]] = Field(
        default_factory=dict, description="variable -> (A's value, B's value), None: unset"
    )
    declared: list[DeclaredDifference] = Field(
        default_factory=list,
        description="what the runs were told differently, each with both values: environment "
        "variables, config keys, launch flags and positional arguments only one run has or "
        "that differ",
    )
    evidence_id: str | None = Field(
        default=None, description="the metrics evidence that records this report"
    )


# a report names at most this many declared differences in its facts (all are in `declared`)
MAX_DECLARED_FACTS = 10


def declared_of(
    case: Case, prov_a: Provenance | None = None, prov_b: Provenance | None = None
) -> list[DeclaredDifference]:
    """Every difference the runs declare, in the order the workflow tests them, then the
    positional arguments no intervention changes."""
    return declared_differences(case, prov_a, prov_b) + positional_differences(
        case.run_a, case.run_b
    )


def _metrics_path(case: Case, which: str, override: Path | None) -> Path:
    if override is not None:
        return override
    run = case.run_a if which == "a" else case.run_b
    if not run.metrics:
        raise InputError(f"run {which} has no metrics path in the case: set runs.{which}.metrics")
    return Path(run.metrics)


def _source_differs(case: Case) -> bool:
    a, b = case.run_a.source, case.run_b.source
    if a is None or b is None:
        return False
    if Path(a.repo).resolve() != Path(b.repo).resolve():
        return True
    return (a.rev or "WORKTREE") != (b.rev or "WORKTREE")


def characterize(
    case: Case,
    step: int | None = None,
    metrics_a: Path | None = None,
    metrics_b: Path | None = None,
    prov_a: Provenance | None = None,
    prov_b: Provenance | None = None,
) -> MismatchReport:
    """Pure: read both runs' metric fingerprints and say where and in what kind of interval,
    and what the runs were told differently (from the case, and the baselines' provenance
    when given)."""
    a = load_metrics(_metrics_path(case, "a", metrics_a))
    b = load_metrics(_metrics_path(case, "b", metrics_b))
    diff = diff_metrics(a, b)
    n = diff.first_step
    facts: list[str] = []
    declared = declared_of(case, prov_a, prov_b)
    env_diff = {d.key: (d.a, d.b) for d in declared if d.kind == "env"}
    told = [d.said() for d in declared[:MAX_DECLARED_FACTS]]
    if len(declared) > MAX_DECLARED_FACTS:
        told.append(f"{len(declared) - MAX_DECLARED_FACTS} more declared differences")
    if n is None:
        msg = (
            f"metric bits agree on all {len(diff.common_steps)} common steps "
            f"({diff.common_steps[0] if diff.common_steps else '-'}..{diff.common_steps[-1] if diff.common_steps else '-'})"
        )
        if not diff.complete:
            msg += (
                f", but the runs are INCOMPLETE ({diff.gaps()}): what is missing was not compared"
            )
        if step is not None:
            msg = f"step {step} was given, but " + msg
        return MismatchReport(
            given_step=step,
            step=None,
            given_step_wrong=step is not None,
            message=msg,
            diff=diff,
            facts=told,
            env_differs=env_diff,
            declared=declared,
        )

    wrong = step is not None and step != n
    first = diff.mismatches[0]
    ulps = ulp_distance(first.a, first.b) if first.a and first.b else float("inf")
    msg = (
        f"first differing step is {n} (last equal: {diff.last_equal_step}); "
        f"{first.metric} on rank {first.rank}: {first.a.bits if first.a else 'missing'} vs "
        f"{first.b.bits if first.b else 'missing'} ({ulps:g} ulp)"
    )
    if wrong:
        msg = f"GIVEN STEP {step} IS WRONG: " + msg
    phases: list[Phase] = []
    src = _source_differs(case)
    if src:
        phases.append("update")
        facts.append("the runs come from different sources (repository or revision)")
    resumes = sorted(set(diff.resumes_a) | set(diff.resumes_b))
    if any(r in (n - 1, n) for r in resumes):
        phases.append("resume")
        side = "B" if any(r in (n - 1, n) for r in diff.resumes_b) else "A"
        facts.append(f"step {n} is the first step after run {side} resumed from a checkpoint")
    # A metric logged at step N reflects the updates before it: the first step's value is
    # the forward at initialisation, the second's the first update's.
    if diff.common_steps and n == diff.common_steps[0]:
        phases.append("first-step")
        facts.append(
            f"step {n} is the first step: its metrics come from the forward at "
            "initialisation, so the difference lies in initialisation or the first batch"
        )
    elif len(diff.common_steps) > 1 and n == diff.common_steps[1]:
        phases.append("first-update")
        facts.append(
            f"step {n} is the first step after the first update: the difference lies in "
            f"initialisation state the forward does not read, or in the first optimizer "
            f"step (step {diff.common_steps[0]})"
        )
    gas = case.gradient_accumulation_steps
    if gas and gas > 1:
        phases.append("gas-boundary")
        facts.append(f"gradient accumulation over {gas} micro-batches ends at every logged step")
    ranks = sorted({m.rank for m in diff.mismatches})
    if len(diff.ranks) > 1:
        facts.append(f"{len(diff.ranks)} ranks; step {n} differs on ranks {ranks}")
        if len(ranks) < len(diff.ranks):
            # Some ranks still agree: what differs is local to the others (a collective's
            # contribution, an uneven shard, a rank-only code path).
            phases.append("multi-rank")
    if case.run_a.model_dump(exclude={"name"}) == case.run_b.model_dump(exclude={"name"}):
        facts.append("A and B are the same command: the difference is run-to-run nondeterminism")
    facts += told
    return MismatchReport(
        given_step=step,
        step=n,
        given_step_wrong=wrong,
        message=msg,
        diff=diff,
        phases=phases,
        facts=facts,
        ranks_differing=ranks,
        source_differs=src,
        env_differs=env_diff,
        declared=declared,
    )


def confirm_mismatch(
    case: Case,
    ledger: Ledger,
    step: int | None = None,
    metrics_a: Path | None = None,
    metrics_b: Path | None = None,
    prov_a: Provenance | None = None,
    prov_b: Provenance | None = None,
) -> MismatchReport:
    """Characterise and record the result in the ledger as metrics evidence; the report
    names that evidence (``evidence_id``) so a verdict can cite it."""
    rep = characterize(case, step, metrics_a, metrics_b, prov_a, prov_b)
    paths = {
        "metrics_a": str(_metrics_path(case, "a", metrics_a)),
        "metrics_b": str(_metrics_path(case, "b", metrics_b)),
    }
    ev = ledger.add_evidence(
        Evidence(
            kind=EvidenceKind.metrics,
            result=EvidenceResult.observed,
            summary=rep.message + ("; " + "; ".join(rep.facts) if rep.facts else ""),
            data=MetricsData(
                **rep.model_dump(
                    mode="json", exclude={"diff": {"common_steps"}, "evidence_id": True}
                ),
                **paths,
            ),
        )
    )
    if rep.given_step_wrong:
        ledger.note(rep.message, level="warning")
    return rep.model_copy(update={"evidence_id": ev.id})

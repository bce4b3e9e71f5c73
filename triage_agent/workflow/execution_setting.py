"""Whether a run policy that made B match A only gave B the execution setting A runs with.

A policy such as ``deterministic`` changes which kernels a run's ops use (another algorithm,
a fixed reduction order), not what the job computes. When it makes every step of B match A,
the fix check's proof does not yet say whose defect that is: A may break the repeatability
contract as much as B (then the policy changes A too), or A may already run with the
setting the policy gives, declared by A itself (a flag, a variable, a line of its own
code) and left out of B. A rerun of A under the same policy, uninstrumented, tells which:

- every step of A under the policy matches A's own baseline: A already runs with that
  setting, and the two runs differ in an execution setting that picks the kernel. That is
  an environment difference in the catalogue's sense; the kernel it swaps keeps its place.
- A's bits move: A itself computes otherwise under the setting; the class stays the one the
  hypothesis's category gives (a bug against the repeatability contract).

Only a proof by the policy on B alone is read so: when the fix check had to apply it to A as
well (a run against its own repeat), A is no reference for the setting and the class stays.

Only policies that choose kernels are read so: ``restore-rng`` changes what a resumed run
restores, which the uninterrupted run never does, so A is unmoved by it whatever the cause.
Runs whose sources differ are left alone: there the policy may cover a changed kernel call.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..evidence_data import RerunData
from ..ledger import Ledger
from ..metrics import diff_metrics, load_metrics
from ..policies import POLICY_HELP
from ..records import Case, Classification, Evidence, EvidenceResult, Hypothesis
from ..runs import materialize
from .arms import prior_rerun
from .classify import CLASSIFICATION
from .fixcheck import _against_a, relaunch_evidence

# Policies that select kernels (algorithms, reduction orders), not the job's own state.
EXECUTION_POLICIES = frozenset({"deterministic"})
CATEGORY = "execution-setting"


def read_policy_proof(
    case: Case,
    ledger: Ledger,
    hyp: Hypothesis,
    policy: str,
    baseline_a_metrics: str,
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> Evidence | None:
    """Rerun A under ``policy`` (which made B match A); when A's bits do not move, the
    hypothesis becomes an execution-setting difference. The rerun's evidence, or None when
    the policy does not choose kernels or A's rerun failed (said in the ledger)."""
    if policy not in EXECUTION_POLICIES or str(hyp.category) == CATEGORY:
        return None
    proof = prior_rerun(ledger, hyp.id)
    if proof is None or proof.data_as(RerunData).applied_to != "B only":
        return None  # the policy had to change A as well: A is no reference for the setting
    on_status(f"policy {policy} on A alone: does A already run with it?")
    out = materialize(
        case.run_a,
        Path(ledger.workspace),
        f"policy-{policy}",  # the fix check's label for A: one cache entry
        policies=[policy],
        timeout_s=timeout_s,
        progress=on_status,
    )
    if not out.ok:
        ledger.note(
            f"{hyp.id}: policy {policy} on A failed ({out.error or out.exit_codes}): whether A "
            "already runs with it is not known",
            level="warning",
        )
        return None
    d = diff_metrics(load_metrics(baseline_a_metrics), load_metrics(out.metrics))
    unmoved, said = _against_a(d)
    ev = ledger.add_evidence(
        relaunch_evidence(
            out,
            # about no hypothesis: the rerun that proves this one stays its last rerun
            result=EvidenceResult.observed,
            summary=f"policy '{policy}' ({POLICY_HELP[policy]}) applied to A alone, "
            f"uninstrumented, against A's own baseline: {said}",
            data=RerunData(policy=policy, applied_to="A only", compared_with="a"),
        )
    )
    if unmoved:
        ledger.update_hypothesis(
            hyp.id,
            category=CATEGORY,
            classification=CLASSIFICATION.get(CATEGORY, Classification.unknown),
            statement=f"{hyp.statement}; policy {policy} changes none of A's bits ({ev.id}): A "
            "already runs with that execution setting and B does not, so the setting picks "
            "the kernel",
        )
    return ev

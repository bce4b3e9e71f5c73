"""Fix validation: rerun the case under one changed policy, uninstrumented, and compare bits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..ledger import Ledger
from ..metrics import diff_metrics, load_metrics
from ..policies import POLICY_HELP
from ..records import Case, Evidence, EvidenceKind, EvidenceResult
from ..runs import materialize


def validate_fix(
    case: Case,
    ledger: Ledger,
    policy: str,
    hypotheses: list[str],
    baseline_a_metrics: str,
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> Evidence:
    """Rerun B under ``policy`` against A's baseline; if that is not enough, rerun both.

    Supported when every common step's metric bits match. No tracing is injected: what is
    validated is the uninstrumented job with only the policy changed.
    """
    ws = Path(ledger.workspace)
    attempts = [("B only", False), ("A and B", True)]
    last: Evidence | None = None
    for label, both in attempts:
        on_status(f"fix check: policy {policy} on {label}")
        out_b = materialize(case.run_b, ws, f"policy-{policy}", policies=[policy], timeout_s=timeout_s, progress=on_status)
        argv = [a for cmd in out_b.argv for a in [*cmd, ";"]][:-1]
        if both:
            out_a = materialize(case.run_a, ws, f"policy-{policy}", policies=[policy], timeout_s=timeout_s, progress=on_status)
            a_metrics = out_a.metrics
            argv += [";", *[a for cmd in out_a.argv for a in [*cmd, ";"]][:-1]]
        else:
            a_metrics = baseline_a_metrics
        if not out_b.ok:
            last = Evidence(
                hypotheses=hypotheses,
                kind=EvidenceKind.rerun,
                result=EvidenceResult.error,
                summary=f"rerun of B under policy {policy} failed (exit codes {out_b.exit_codes}); logs: {out_b.logs}",
                argv=argv,
            )
            ledger.add_evidence(last)
            return last
        d = diff_metrics(load_metrics(a_metrics), load_metrics(out_b.metrics))
        matched = d.first_step is None and bool(d.common_steps)
        summary = (
            f"policy '{policy}' ({POLICY_HELP[policy]}) applied to {label}, uninstrumented: "
            + (
                f"all {len(d.common_steps)} common steps ({d.common_steps[0]}..{d.common_steps[-1]}) now match bit for bit"
                if matched
                else f"still differs first at step {d.first_step}"
            )
        )
        last = Evidence(
            hypotheses=hypotheses,
            kind=EvidenceKind.rerun,
            result=EvidenceResult.supported if matched else EvidenceResult.refuted,
            summary=summary,
            argv=argv,
            data={"policy": policy, "applied_to": label, "first_step": d.first_step, "common_steps": len(d.common_steps)},
            duration_s=out_b.seconds,
        )
        if matched or both:
            break
    assert last is not None
    ledger.add_evidence(last)
    return last

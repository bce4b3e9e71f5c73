"""Shared builders for tests that write a ledger by hand (no tests here)."""

from __future__ import annotations

from typing import Any

from triage_agent.ledger import Ledger
from triage_agent.records import (
    Evidence,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    HypothesisStatus,
)


def add_evidence(
    ledger: Ledger,
    hyp: str | None,
    result: EvidenceResult,
    kind: EvidenceKind = EvidenceKind.reproducer,
    summary: str | None = None,
    **fields: Any,
) -> Evidence:
    """Record evidence about ``hyp`` (about none when None): a reproducer's unless ``kind``
    says otherwise, summarised by its result unless ``summary`` is given."""
    return ledger.add_evidence(
        Evidence(
            hypotheses=[hyp] if hyp else [],
            kind=kind,
            result=result,
            summary=summary if summary is not None else result.value,
            **fields,
        )
    )


def supported_hypothesis(
    ledger: Ledger,
    statement: str,
    category: str,
    kind: EvidenceKind = EvidenceKind.reproducer,
    summary: str | None = None,
) -> Hypothesis:
    """Put a hypothesis and mark it supported by one piece of ``kind`` evidence; returns the
    hypothesis as put (before the status change), as a caller holding it would."""
    hyp = ledger.put_hypothesis(Hypothesis(statement=statement, category=category))
    ev = add_evidence(ledger, hyp.id, EvidenceResult.supported, kind, summary)
    ledger.update_hypothesis(hyp.id, status=HypothesisStatus.supported, evidence=[ev.id])
    return hyp

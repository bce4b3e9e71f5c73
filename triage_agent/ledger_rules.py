"""The ledger's invariants, as pure checks over a folded state.

The ledger calls each check while it holds its lock, on the state it folded under that
lock, and appends only if the check passes: a rule can never be judged against state that
another writer (a thread of the MCP server, another process) changed in between. Every
caller, the CLI, the workflow and the MCP tools alike, goes through them.

- A hypothesis rests only on findings the ledger holds.
- A hypothesis becomes supported or refuted only on execution evidence about it with that
  result (cited, or found in the ledger when the caller cites none), and against evidence
  of the opposite result only with a stated reason, which the hypothesis keeps.
- A verdict other than ``unknown`` names a supported hypothesis and cites execution
  evidence that supports it; any hypothesis a verdict names is supported.
- One workspace's ledger belongs to one case (its mismatch step may be refined).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from .errors import InputError, LedgerError
from .records import (
    EXECUTION_KINDS,
    Case,
    Evidence,
    Finding,
    Hypothesis,
    HypothesisStatus,
    Verdict,
)


class FoldedState(Protocol):
    """What the rules read of the ledger's folded state (``ledger.LedgerState`` is one):
    the ledger hands its state in, so the rules need nothing of the ledger itself."""

    @property
    def case(self) -> Case | None: ...

    @property
    def findings(self) -> Mapping[str, Finding]: ...

    @property
    def hypotheses(self) -> Mapping[str, Hypothesis]: ...

    @property
    def evidence(self) -> Sequence[Evidence]: ...

    def evidence_for(self, hypothesis_id: str) -> list[Evidence]: ...


# The workflow marks a hypothesis by the result of the test it has just run and cites; what
# an earlier test said stays in the ledger beside it, and this is the reason recorded.
BY_LATEST_TEST = (
    "set by the workflow from the result of the test it cites; the evidence that says "
    "otherwise tested it another way and stays in the ledger"
)

_EXECUTION_NAMES = "reproducer, replay, byte compare, trace, manifest or rerun"


def _supports(ev: Evidence, hyp_id: str, result: str) -> bool:
    return ev.kind in EXECUTION_KINDS and hyp_id in ev.hypotheses and ev.result.value == result


def check_findings(st: FoldedState, hyp: Hypothesis) -> None:
    missing = [f for f in hyp.findings if f not in st.findings]
    if missing:
        raise InputError(f"unknown finding id(s): {', '.join(missing[:10])}")


def check_status(
    st: FoldedState,
    hyp_id: str,
    status: HypothesisStatus,
    cited: list[str] | None,
    reason: str = "",
) -> bool:
    """``supported``/``refuted`` need execution evidence about ``hyp_id`` saying so, and a
    stated ``reason`` when other execution evidence about it says the opposite. Returns
    whether the reason was needed (the hypothesis keeps it only then).

    ``cited`` None means the caller cites nothing and the ledger looks for such evidence
    itself; a list (possibly empty) means only those pieces count."""
    if status not in (HypothesisStatus.supported, HypothesisStatus.refuted):
        return False
    by_id = {e.id: e for e in st.evidence}
    if cited is None:
        pool = st.evidence_for(hyp_id)
        how = "the ledger holds none"
    else:
        unknown = [e for e in cited if e not in by_id]
        if unknown:
            raise InputError(f"unknown evidence id(s): {', '.join(unknown[:10])}")
        pool = [by_id[e] for e in cited]
        how = "cite its id"
    if not any(_supports(e, hyp_id, status.value) for e in pool):
        raise InputError(
            f"marking {hyp_id} {status.value} needs execution evidence ({_EXECUTION_NAMES}) "
            f"about {hyp_id} whose result is {status.value}; {how}"
        )
    other = (
        HypothesisStatus.refuted
        if status == HypothesisStatus.supported
        else HypothesisStatus.supported
    )
    against = [e.id for e in st.evidence_for(hyp_id) if _supports(e, hyp_id, other.value)]
    if against and not reason.strip():
        raise InputError(
            f"evidence {', '.join(against[:5])} says {hyp_id} is {other.value}; marking it "
            f"{status.value} against that needs a stated reason (reason), which is recorded"
        )
    return bool(against)


def check_verdict(st: FoldedState, verdict: Verdict) -> None:
    """Refuse a verdict the evidence does not carry.

    A static finding, a refuted reproducer or an inconclusive trace never carries one."""
    known = {e.id: e for e in st.evidence}
    missing = sorted(set(verdict.evidence) - set(known))
    if missing:
        raise LedgerError(f"verdict cites unknown evidence: {', '.join(missing)}")
    chain = [known[e] for e in verdict.evidence]
    if verdict.hypothesis is not None:
        hyp = st.hypotheses.get(verdict.hypothesis)
        if hyp is None:
            raise LedgerError(f"verdict names unknown hypothesis {verdict.hypothesis!r}")
        if hyp.status != HypothesisStatus.supported:
            raise LedgerError(
                f"hypothesis {hyp.id} is {hyp.status.value}, not supported: "
                "only a supported hypothesis can carry a verdict"
            )
    if verdict.classification == "unknown":
        return
    if verdict.hypothesis is None:
        raise LedgerError(
            f"a '{verdict.classification.value}' verdict must name the supported "
            "hypothesis it rests on and cite execution evidence that supports it; "
            "without them the honest verdict is 'unknown'"
        )
    if not any(_supports(e, verdict.hypothesis, "supported") for e in chain):
        raise LedgerError(
            "a verdict other than 'unknown' needs execution evidence in its chain "
            f"({_EXECUTION_NAMES}) that supports {verdict.hypothesis}"
        )


def case_is_new(st: FoldedState, case: Case, where: str) -> bool:
    """Whether ``case`` must be appended; a different case in the same ledger is refused."""
    old = st.case
    if old == case:
        return False
    if old is not None and old.model_dump(exclude={"mismatch_step"}) != case.model_dump(
        exclude={"mismatch_step"}
    ):
        raise InputError(
            f"the ledger {where} belongs to case {old.name!r}: use another workspace for "
            "a different case, or move the old ledger away"
        )
    return True

"""Concurrent writers (threads, as the MCP server runs tools, and processes) against one
ledger: no update is lost and no rule is checked against state another writer changed."""

from __future__ import annotations

import multiprocessing as mp
import threading
from functools import partial

import pytest
from test_ledger_support import add_evidence

from triage_agent.errors import TriageError
from triage_agent.ledger import Ledger, LedgerState, _fold
from triage_agent.records import (
    Classification,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    HypothesisStatus,
    Verdict,
)

ROUNDS = 25


def _race(*fns):
    """Run ``fns`` in threads released together; re-raise nothing, return the exceptions."""
    gate = threading.Barrier(len(fns))
    errors: list[BaseException | None] = [None] * len(fns)

    def body(i, fn):
        gate.wait()
        try:
            fn()
        except TriageError as exc:
            errors[i] = exc

    threads = [threading.Thread(target=body, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_ledger_threads_updating_one_hypothesis_lose_no_field(tmp_path):
    ledger = Ledger(tmp_path)
    lost = 0
    for r in range(ROUNDS):
        h = ledger.put_hypothesis(Hypothesis(statement=f"s{r}", category="c"))
        update = partial(ledger.update_hypothesis, h.id)
        _race(
            partial(update, classification=Classification.bug),
            partial(update, statement=f"reworded {r}"),
            partial(update, category="rng-state"),
        )
        got = ledger.state().hypotheses[h.id]
        lost += (got.classification, got.statement, got.category) != (
            Classification.bug,
            f"reworded {r}",
            "rng-state",
        )
    assert lost == 0, f"{lost} of {ROUNDS} rounds lost an update"


def _prefix_states(ledger: Ledger):
    """Yield (event, state folded from every event before it)."""
    events, _ = ledger.read_events()
    st = LedgerState()
    for ev in events:
        yield ev, st
        _fold(st, ev)


def test_ledger_threads_never_record_a_verdict_on_a_hypothesis_refuted_meanwhile(tmp_path):
    """A verdict races a refutation of its hypothesis; whichever wins, the log as written
    must obey the rule at the verdict's own position."""
    ledger = Ledger(tmp_path)
    for r in range(ROUNDS):
        h = ledger.put_hypothesis(Hypothesis(statement=f"s{r}", category="c"))
        yes = add_evidence(ledger, h.id, EvidenceResult.supported)
        no = add_evidence(ledger, h.id, EvidenceResult.refuted)
        ledger.update_hypothesis(
            h.id, status=HypothesisStatus.supported, evidence=[yes.id], reason="race"
        )
        verdict = Verdict(
            hypothesis=h.id, classification=Classification.bug, statement="v", evidence=[yes.id]
        )
        _race(
            partial(
                ledger.update_hypothesis,
                h.id,
                status=HypothesisStatus.refuted,
                evidence=[no.id],
                reason="race",
            ),
            partial(ledger.set_verdict, verdict),
        )
    verdicts = 0
    for ev, before in _prefix_states(ledger):
        if ev.kind == "verdict":
            verdicts += 1
            hid = ev.data["hypothesis"]
            assert before.hypotheses[hid].status == HypothesisStatus.supported, (
                f"verdict {ev.id} recorded while {hid} was {before.hypotheses[hid].status}"
            )
    assert verdicts > 0  # some rounds let the verdict in first


def test_ledger_status_rule_holds_for_headless_callers(tmp_path):
    ledger = Ledger(tmp_path)
    h = ledger.put_hypothesis(Hypothesis(statement="s", category="c"))
    with pytest.raises(TriageError, match="needs execution evidence"):
        ledger.update_hypothesis(h.id, status=HypothesisStatus.supported)
    said = "a note is not execution"
    add_evidence(ledger, h.id, EvidenceResult.supported, EvidenceKind.note, said)
    with pytest.raises(TriageError, match="needs execution evidence"):
        ledger.update_hypothesis(h.id, status=HypothesisStatus.supported)
    refuted = add_evidence(ledger, h.id, EvidenceResult.refuted)
    with pytest.raises(TriageError, match="needs execution evidence"):
        ledger.update_hypothesis(h.id, status=HypothesisStatus.supported, evidence=[refuted.id])
    with pytest.raises(TriageError, match="unknown evidence"):
        ledger.update_hypothesis(h.id, status=HypothesisStatus.refuted, evidence=["E-nope"])
    assert ledger.state().hypotheses[h.id].status == HypothesisStatus.open
    # without a citation the ledger finds the evidence itself
    assert ledger.update_hypothesis(h.id, status=HypothesisStatus.refuted).status == "refuted"
    # inconclusive and open need nothing
    assert ledger.update_hypothesis(h.id, status=HypothesisStatus.inconclusive).status == (
        "inconclusive"
    )


def test_ledger_hypothesis_resting_on_unknown_finding_is_refused(tmp_path):
    ledger = Ledger(tmp_path)
    with pytest.raises(TriageError, match="F-nope"):
        ledger.put_hypothesis(Hypothesis(statement="s", category="c", findings=["F-nope"]))
    assert ledger.state().hypotheses == {}


def test_ledger_threads_recording_two_cases_keep_one(tmp_path):
    from triage_agent.records import Case, RunSpec

    def case(name):
        return Case(name=name, run_a=RunSpec(name="a"), run_b=RunSpec(name="b"))

    for r in range(ROUNDS):
        ledger = Ledger(tmp_path / str(r))
        errors = _race(
            partial(ledger.record_case, case("one")), partial(ledger.record_case, case("two"))
        )
        events, _ = ledger.read_events()
        assert [e.kind for e in events] == ["case"]
        assert sum(e is not None for e in errors) == 1
    assert ledger.record_case(ledger.state().case) is False
    moved = ledger.state().case.model_copy(update={"mismatch_step": 9})
    assert ledger.record_case(moved) is True and ledger.state().case.mismatch_step == 9


def _update_field(path, hid, field, n, gate):
    ledger = Ledger(path)
    gate.wait()
    for i in range(n):
        ledger.update_hypothesis(hid, **{field: f"{field}-{i}"})


def test_ledger_processes_updating_one_hypothesis_lose_no_field(tmp_path):
    ledger = Ledger(tmp_path)
    h = ledger.put_hypothesis(Hypothesis(statement="s", category="c", rationale="r"))
    n, fields = 60, ("statement", "category", "rationale")
    ctx = mp.get_context("spawn")
    gate = ctx.Barrier(len(fields))
    procs = [
        ctx.Process(target=_update_field, args=(str(tmp_path), h.id, f, n, gate)) for f in fields
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * len(fields)
    got = ledger.state().hypotheses[h.id]
    assert [getattr(got, f) for f in fields] == [f"{f}-{n - 1}" for f in fields]

"""A hypothesis a reproducer supports in isolation is not this mismatch's verdict unless the
runs show it: a trace origin it explains, or its fix making every step match. Without
either (no trace, its fix never run), the verdict is unknown, and the ledger says why."""

from __future__ import annotations

import time

from test_ledger_support import supported_hypothesis

from triage_agent.ledger import Ledger
from triage_agent.metrics import MetricDiff
from triage_agent.records import Case, Classification, RunSpec
from triage_agent.workflow.characterize import MismatchReport
from triage_agent.workflow.engine import decide
from triage_agent.workflow.options import RunOptions


def test_a_reproducer_alone_with_nothing_in_the_runs_behind_it_is_no_verdict(tmp_path):
    run = RunSpec(name="a", metrics=str(tmp_path / "a"))
    case = Case(name="resumed", workspace=str(tmp_path / "ws"), run_a=run, run_b=run)
    ledger = Ledger(case.workspace)
    hyp = supported_hypothesis(
        ledger, "checkpoint save/load omits RNG state: lib/engine.py:40", "rng-state"
    )
    rep = MismatchReport.model_construct(
        given_step=None, step=4, message="", diff=MetricDiff.model_construct(), source_differs=False
    )
    v = decide(
        case,
        ledger,
        rep,
        [ledger.state().hypotheses[hyp.id]],
        None,
        None,
        RunOptions(timeout_s=60),
        lambda stage, msg: None,
        time.monotonic() + 600,
    )
    assert v.classification == Classification.unknown, v
    notes = [str(n.get("message", n)) for n in ledger.state().notes]
    assert any(f"{hyp.id} is backed by a reproducer alone" in n for n in notes), notes


def test_a_reproducer_supported_site_gives_way_to_a_cause_an_intervention_proved(tmp_path):
    from test_ledger_support import add_evidence

    from triage_agent.records import EvidenceKind, EvidenceResult, HypothesisStatus
    from triage_agent.workflow.engine import _candidates

    ledger = Ledger(str(tmp_path / "ws"))
    isolated = supported_hypothesis(
        ledger, "the engine drops RNG state: lib/engine.py:40", "rng-state"
    )
    proven = supported_hypothesis(
        ledger, "the sampler's state_dict leaves its offset out", "cursor-state", EvidenceKind.rerun
    )
    add_evidence(ledger, proven.id, EvidenceResult.supported, EvidenceKind.rerun)
    assert [h.id for h in _candidates(ledger, None)] == [proven.id]
    st = ledger.state()
    assert st.hypotheses[isolated.id].status == HypothesisStatus.inconclusive
    assert st.hypotheses[proven.id].status == HypothesisStatus.supported

"""The engine's contracts: the typed stage-2 result it reads, resumes that redo what
depended on the mismatch step, verdict reuse by event order, sentences for people."""

from __future__ import annotations

from pathlib import Path

from test_ledger_support import add_evidence
from test_workflow_support import event_ref

from triage_agent.compare.result import EventRef, Widen
from triage_agent.ledger import Ledger
from triage_agent.ledger_view import action_text, to_markdown
from triage_agent.metrics import MetricLog
from triage_agent.records import (
    Case,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    HypothesisStatus,
    RunSpec,
)
from triage_agent.workflow.engine import _candidates, run_workflow
from triage_agent.workflow.options import RunOptions
from triage_agent.workflow.stage2 import Stage2Result, widen_sentences


def _write(d: Path, steps: int, diverge_at: int | None) -> None:
    log = MetricLog(d, rank=0)
    for s in range(steps):
        loss = 1.0 / (s + 1)
        if diverge_at is not None and s >= diverge_at:
            loss += 2**-30
        log.log(s, loss=loss)
    log.close()


def _metrics_case(tmp_path: Path, diverge_at: int) -> Case:
    """A case given by its metric files (no relaunch): confirm, scan, verdict only."""
    for name, at in (("a", None), ("b", diverge_at)):
        d = tmp_path / name
        if d.exists():
            for f in d.iterdir():
                f.unlink()
        _write(d, 10, at)
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "train.py").write_text("print('hello')\n")
    return Case(
        name="metrics-only",
        workspace=str(tmp_path / "ws"),
        source_roots=[str(src)],
        run_a=RunSpec(name="a", metrics=str(tmp_path / "a")),
        run_b=RunSpec(name="b", metrics=str(tmp_path / "b")),
    )


def _origin_ref() -> EventRef:
    return event_ref("aten::index_add_", scope="emb", step=3, index=7, line=9)


def test_a_replay_supported_origin_is_kept_and_not_said_to_miss_itself(tmp_path):
    ledger = Ledger(tmp_path / "ws")
    stage1 = ledger.put_hypothesis(Hypothesis(statement="a cast round trip", category="casts"))
    origin = ledger.put_hypothesis(
        Hypothesis(statement="aten::index_add_ is nondeterministic", category="nondeterminism")
    )
    for h in (stage1, origin):
        # each supported by its own test
        kind = EvidenceKind.replay if h is origin else EvidenceKind.reproducer
        ev = add_evidence(ledger, h.id, EvidenceResult.supported, kind)
        ledger.update_hypothesis(h.id, status=HypothesisStatus.supported, evidence=[ev.id])
    trace_ev = add_evidence(ledger, None, EvidenceResult.observed, EvidenceKind.trace_compare, "t")
    trace = Stage2Result(
        step=3,
        window=(2, 3),
        evidence=trace_ev,
        origin=_origin_ref(),
        origin_location="rank 0 step 3 op emb::aten::index_add_",
        origin_hypothesis=origin.id,
        explains=[],
    )
    kept = _candidates(ledger, trace)
    assert [h.id for h in kept] == [origin.id]
    said = " ".join(n["text"] for n in ledger.state().notes)
    assert stage1.id in said and origin.id not in said


def test_another_first_step_redoes_confirm_scan_and_verdict(tmp_path):
    case = _metrics_case(tmp_path, diverge_at=7)
    ledger = Ledger(case.workspace)
    first = run_workflow(case, ledger, RunOptions(budget_minutes=5))
    assert first.mismatch.step == 7 and first.verdict.statement.startswith(
        "metric bits first differ at step 7"
    )
    # the same case, its metrics now first differing at step 4 (baselines made again)
    _metrics_case(tmp_path, diverge_at=4)
    again = run_workflow(case, ledger, RunOptions(budget_minutes=5))
    st = ledger.state()
    assert again.mismatch.step == 4
    assert "step 4" in again.verdict.statement and "step 7" not in again.verdict.statement
    metrics = [e for e in st.evidence if e.kind == EvidenceKind.metrics]
    assert [e.data.step for e in metrics] == [7, 4]
    scans = [s for s in st.stages if s["stage"] == "scan" and s["status"] == "done"]
    assert [s["step"] for s in scans] == [7, 4]
    assert "first mismatching step 4" in to_markdown(st)


def test_another_given_step_is_recorded_and_checked(tmp_path):
    case = _metrics_case(tmp_path, diverge_at=7)
    ledger = Ledger(case.workspace)
    run_workflow(case, ledger, RunOptions(mismatch_step=7, budget_minutes=5))
    run_workflow(case, ledger, RunOptions(mismatch_step=5, budget_minutes=5))
    st = ledger.state()
    assert st.case.mismatch_step == 5
    assert any("GIVEN STEP 5 IS WRONG" in n["text"] for n in st.notes)
    assert "first mismatching step 7 (given: 5)" in to_markdown(st)


def test_evidence_recorded_again_after_a_verdict_is_not_ignored(tmp_path):
    case = _metrics_case(tmp_path, diverge_at=7)
    ledger = Ledger(case.workspace)
    first = run_workflow(case, ledger, RunOptions(budget_minutes=5))
    assert first.verdict.classification.value == "unknown"
    # An intervention's rerun recorded before the verdict is recorded again after it (work
    # redone after an interruption): same id, same 'created', new result. (A reproducer
    # alone would not do: with no traced origin it explains it is never the verdict.)
    h = ledger.put_hypothesis(Hypothesis(statement="B casts through bf16", category="casts"))
    then = "2000-01-01T00:00:00.000+00:00"
    ev = add_evidence(
        ledger, h.id, EvidenceResult.inconclusive, EvidenceKind.rerun, "timed out", created=then
    )
    ledger.add_evidence(ev.model_copy(update={"result": EvidenceResult.supported}))
    ledger.update_hypothesis(h.id, status=HypothesisStatus.supported, evidence=[ev.id])
    second = run_workflow(case, ledger, RunOptions(budget_minutes=5))
    assert second.verdict.hypothesis == h.id
    assert second.verdict.classification.value == "policy-difference"
    # and a run with nothing new reuses it
    n = ledger.state().events
    third = run_workflow(case, ledger, RunOptions(budget_minutes=5))
    assert third.verdict == second.verdict
    assert not [e for e in ledger.read_events()[0][n:] if e.kind in ("evidence", "verdict")]


def test_the_next_action_is_sentences_in_every_rendering():
    w = Widen(
        steps="start the window before step 2: the first traced step already receives "
        "different inputs",
        level="capture level is 'module': capture ATen ops in scope 'blocks.0'",
    )
    said = widen_sentences(w)
    assert said.startswith("Start the window before step 2") and "{" not in said
    assert said.count(". ") == 1 and said.endswith(".")
    # an older ledger's verdict holds the dict as JSON: it is said as the same sentences
    assert action_text(w.model_dump_json(exclude_none=True)) == said
    assert action_text("read the change.") == "read the change."

"""A proven setting read from the optimizer's counters at the step boundary when no op trace
sees inside the update: located at the one flagged statement of that optimizer that writes
the counter, and left unknown when the evidence does not single one out."""

from __future__ import annotations

from pathlib import Path

from test_ledger_support import add_evidence, supported_hypothesis

from triage_agent.evidence_data import ManifestData, TraceCompareData
from triage_agent.ledger import Ledger
from triage_agent.records import (
    Evidence,
    EvidenceKind,
    EvidenceResult,
    Finding,
)
from triage_agent.workflow.setting_effect import read_proven_setting
from triage_agent.workflow.state_counter import counter_writer

WRITE = Finding(
    probe_id="accum-loop-var-after-loop",
    category="accumulation",
    file="shardopt/multi.py",
    line_start=41,
    line_end=41,
    function="MultiAdam.step",
    snippet="        slot['t'] += 1",
    rationale="A value bound per parameter and read after the loop belongs to the last "
    "parameter only. More words.",
)


def _diff(point: str, *counters: tuple[str, int, int]) -> dict:
    return {
        "point": point,
        "rank": 0,
        "between": "A vs B",
        "diff": {
            "equal": not counters,
            "differences": [
                {
                    "path": p,
                    "section": "scalar",
                    "reason": "value",
                    "a": f"int:{a}",
                    "b": f"int:{b}",
                }
                for p, a, b in counters
            ],
            "only_in_a": [],
            "only_in_b": [],
        },
    }


def _ledger(tmp_path: Path, findings: list[Finding], diffs: list[dict]) -> Ledger:
    ledger = Ledger(tmp_path / "ws")
    for f in findings:
        ledger.add_finding(f)
    ledger.add_evidence(
        Evidence(
            kind=EvidenceKind.manifest,
            result=EvidenceResult.observed,
            summary="state manifests",
            data=ManifestData(after_step=2, diffs=diffs),
        )
    )
    return ledger


def _trace(kind: str = "optimizer", scope: str = "MultiAdam") -> TraceCompareData:
    row = {"rank": 0, "role": "origin", "step": 2, "kind": kind, "scope": scope, "name": "g0.p0"}
    return TraceCompareData(level="collective", rows=[row])


MOVED = [
    _diff("init"),
    _diff("after-2", ("optimizer.state.0.t", 3, 1), ("optimizer.state.5.t", 3, 0)),
]


def test_a_counter_the_setting_moves_is_located_at_its_one_flagged_write(tmp_path):
    ledger = _ledger(tmp_path, [WRITE], MOVED)
    loc, said = counter_writer(ledger, _trace())
    assert loc.startswith("shardopt/multi.py:41 (MultiAdam.step")
    assert "optimizer.state.0.t (A 3, B 1)" in said and "belongs to the last parameter" in said


def test_without_one_flagged_write_of_that_optimizer_the_counter_is_not_located(tmp_path):
    other_class = WRITE.model_copy(update={"id": "F-other", "function": "OtherOpt.step"})
    twice = WRITE.model_copy(update={"id": "F-twice", "line_start": 47, "line_end": 47})
    reads = WRITE.model_copy(update={"id": "F-reads", "snippet": "if slot['t'] == 0:"})
    for findings in ([], [other_class], [WRITE, twice], [reads]):
        ledger = _ledger(tmp_path / str(len(list(tmp_path.iterdir()))), findings, MOVED)
        assert counter_writer(ledger, _trace()) is None, findings
    # counters that already differ at initialisation, none that differ, a non-optimizer origin
    for diffs, trace in (
        ([_diff("init", ("optimizer.state.0.t", 1, 0)), MOVED[1]], _trace()),
        ([_diff("init"), _diff("after-2")], _trace()),
        (MOVED, _trace(kind="op", scope="")),
    ):
        ledger = _ledger(tmp_path / str(len(list(tmp_path.iterdir()))), [WRITE], diffs)
        assert counter_writer(ledger, trace) is None


def test_a_proven_setting_without_an_op_trace_is_read_from_the_counters(tmp_path):
    ledger = _ledger(tmp_path, [WRITE], MOVED)
    hyp = supported_hypothesis(
        ledger,
        "the runs differ in launch flag --shard-groups",
        "config",
        EvidenceKind.rerun,
        "all steps match",
    )
    trace_ev = add_evidence(
        ledger,
        None,
        EvidenceResult.observed,
        EvidenceKind.trace_compare,
        "module trace",
        data=_trace(),
    )
    read = read_proven_setting(
        None,  # the case and the report are read only on the op-trace path
        ledger,
        None,
        hyp,
        "config:--shard-groups",
        trace_ev,
        timeout_s=60,
        deadline=0,
    )
    assert read is not None and read.classification.value == "bug"
    assert read.location.startswith("shardopt/multi.py:41")
    after = ledger.state().hypotheses[hyp.id]
    assert after.category == "config-defect" and "exposes a defect" in after.statement

"""Kill -9 of `triage run` as a stage starts, then `triage run` again: the resumed run ends
as an uninterrupted one does, with no evidence lost or recorded twice and no launch redone
past the one cut short. CI kills a metric-only case (confirm, scan, verdict) at its scan
(and, marked slow, at its verdict); the benchmark (benchmarks/faults.py --workflow CASE) kills a relaunched
case at every stage it reaches."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_mcp_support import make_workspace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import faults  # noqa: E402
from triage_agent.evidence_data import TraceCompareData  # noqa: E402
from triage_agent.ledger import Ledger  # noqa: E402
from triage_agent.records import Evidence, EvidenceKind, EvidenceResult  # noqa: E402
from triage_agent.workflow.stage2 import _as_held  # noqa: E402


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    root = tmp_path_factory.mktemp("case")
    make_workspace(root)
    ref = faults.workflow_reference(root, tmp_path_factory.mktemp("ref"))
    assert ref.verdict and ref.evidence["static"] == 1, ref
    return root, ref


@pytest.mark.parametrize(
    "stage",
    ["scan", pytest.param("verdict", marks=pytest.mark.slow)],  # 3 runs of triage each
)
def test_kill9_at_a_stage_then_resume_loses_and_repeats_nothing(case, tmp_path, stage):
    root, ref = case
    k = faults.workflow_kill(root, tmp_path, stage, ref, timeout=300)
    assert k.reached, k
    assert k.survived, k


def _comparison(dirs: dict[str, str], level: str = "module") -> Evidence:
    return Evidence(
        kind=EvidenceKind.trace_compare,
        result=EvidenceResult.observed,
        summary=f"{level} trace: traces diverged",
        data=TraceCompareData(level=level, steps=[2, 3], trace_dirs=dirs),
    )


def test_a_resumed_stage_2_updates_the_comparison_it_made_before_the_kill(tmp_path):
    """Killed just after stage 2 recorded its module-level comparison, a resumed run
    compares the same cached traces again: that must update the held record, not add a
    second one (measured: kill -9 at compare gave 3 trace comparisons where an uninterrupted
    run gives 2)."""
    ledger = Ledger(tmp_path / "ws")
    dirs = {"a": str(tmp_path / "a"), "b": str(tmp_path / "b")}
    held = ledger.add_evidence(_comparison(dirs))
    again = _as_held(ledger, _comparison(dirs))
    assert again.id == held.id
    ledger.add_evidence(again)
    assert [e.id for e in ledger.state().evidence] == [held.id]
    # other traces, or the same traces at another level, are another comparison
    assert _as_held(ledger, _comparison({"a": dirs["a"], "b": str(tmp_path / "c")})).id != held.id
    assert _as_held(ledger, _comparison(dirs, level="op")).id != held.id

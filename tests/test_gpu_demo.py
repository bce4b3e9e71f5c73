"""The GPU demo: a real CUDA run-to-run nondeterminism found by the trace stage, on an H200."""

import pytest

from reproducers.demo_gpu.case import write_gpu_case
from triage_agent.config import load_case
from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind, EvidenceResult
from triage_agent.workflow.engine import run_workflow
from triage_agent.workflow.options import RunOptions


@pytest.mark.gpu
def test_gpu_demo_trace_finds_the_atomic_op_and_replay_shows_it(tmp_path):
    case = load_case(write_gpu_case(tmp_path / "case"))
    ledger = Ledger(case.workspace)
    result = run_workflow(case, ledger, RunOptions(timeout_s=300, max_hypotheses=3))
    st = ledger.state()
    assert result.mismatch is not None and result.mismatch.step is not None
    origins = [
        e for e in st.evidence if e.kind == EvidenceKind.trace_compare and e.data.origin
    ]
    assert origins, "the trace stage found no origin"
    # The planted op: index_add_ inside the Pool module.
    assert "index_add" in origins[-1].data.origin_location
    assert "pool" in origins[-1].data.origin_location
    reruns = [e for e in st.evidence if e.kind == EvidenceKind.rerun]
    assert reruns and reruns[-1].result == EvidenceResult.supported
    assert result.verdict is not None and result.verdict.classification.value != "unknown"
    # Causality through execution: a repeatability reproducer or a replay of the captured op.
    assert any(
        e.kind in (EvidenceKind.reproducer, EvidenceKind.replay)
        and e.result == EvidenceResult.supported
        for e in st.evidence
    )

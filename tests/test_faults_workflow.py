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

"""The megatron-vs-deepspeed case end to end on a CUDA device: megatron-core trains the
reference, DeepSpeed ZeRO 2 bf16 the suspect, both dump their boundaries, and
``triage_agent.correspond`` finds the first differing boundary, names the policy, and shows
that the case's intervention on B makes every boundary of every step match.

``TRIAGE_CORRESPOND_WS`` names a workspace whose finished runs are reused (the GPU script
runs the case first); without it the runs go to a temporary one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cases.corpus import discover, stage

pytestmark = pytest.mark.gpu

CASE = next(c for c in discover() if c.name == "megatron-vs-deepspeed")


def _cuda_stack() -> bool:
    try:
        import torch

        if not torch.cuda.is_available():
            return False
        import deepspeed  # noqa: F401
        import megatron.core  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def case_and_ws(tmp_path_factory):
    if not _cuda_stack():
        pytest.skip("needs CUDA, DeepSpeed and megatron-core")
    from triage_agent.config import load_case

    tmp = tmp_path_factory.mktemp("mvd")
    ws = Path(os.environ.get("TRIAGE_CORRESPOND_WS") or tmp / "ws")
    return load_case(stage(CASE, tmp)), ws


def test_baseline_first_difference_is_found_and_named(case_and_ws):
    from triage_agent.correspond.workflow import run_case

    case, ws = case_and_ws
    r = run_case(case, ws, [])
    t = r.table
    assert t.pairs > 0 and t.unmapped == 0, r.mapping.unmapped
    assert t.first is not None
    assert t.policy is not None and t.policy.explains_all, t.policy
    rows = {row.boundary: row for row in t.rows}
    assert rows[t.first.boundary].verdict == "differs"
    # every boundary the first difference precedes in its step matched
    order = [row.boundary for row in t.rows]
    for b in order[: order.index(t.first.boundary)]:
        assert rows[b].first_step is None or rows[b].first_step > t.first.step, rows[b]


def test_the_intervention_on_b_makes_every_boundary_match(case_and_ws):
    from triage_agent.correspond.workflow import run_case

    case, ws = case_and_ws
    r = run_case(case, ws, [CASE.expected.intervention])
    assert r.table.first is None, (r.table.first, r.table.policy)
    assert [row.verdict for row in r.table.rows] == ["match"] * 5
    assert r.metrics.startswith("all "), r.metrics

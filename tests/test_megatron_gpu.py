"""The megatron-vs-deepspeed case end to end on a CUDA device: megatron-core trains the
reference, DeepSpeed ZeRO 2 bf16 the suspect, both dump their boundaries, and
``triage_agent.correspond`` finds the first differing boundary, names the policy, and shows
that the case's intervention on B makes every boundary of every step match; then the
alignment loop, told nothing, finds an intervention on B's own surface that does, and in
the clipping cell (both clip at norm 1.0) tries the clip candidates and says what it proved.

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
def staged(tmp_path_factory) -> tuple[Path, Path]:
    """(the staged case file, the workspace)"""
    if not _cuda_stack():
        pytest.skip("needs CUDA, DeepSpeed and megatron-core")
    tmp = tmp_path_factory.mktemp("mvd")
    ws = Path(os.environ.get("TRIAGE_CORRESPOND_WS") or tmp / "ws")
    return stage(CASE, tmp), ws


@pytest.fixture(scope="module")
def case_and_ws(staged):
    from triage_agent.config import load_case

    return load_case(staged[0]), staged[1]


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


def test_the_loop_told_nothing_aligns_every_boundary(case_and_ws):
    from triage_agent.correspond.align import Budget
    from triage_agent.correspond.table import align_markdown
    from triage_agent.correspond.workflow import align_case
    from triage_agent.ledger import Ledger

    case, ws = case_and_ws
    r = align_case(case, ws, [], budget=Budget(reruns=4, minutes=8))
    t = r.alignment
    print(align_markdown(t))
    assert t.launched.first is not None and t.kept, t.stopped
    assert t.aligned.first is None, align_markdown(t)
    assert [row.aligned for row in t.rows] == ["match"] * 5
    for s in t.walk:  # every differing boundary proven by the attempt that aligned it
        assert s.proven_by is not None and s.attempts[-1].outcome == "aligned", s
    hyps = Ledger(ws).state().hypotheses
    assert all(hyps[s.hypothesis_id].status == "supported" for s in t.walk)


def test_the_clipping_cell_is_aligned_by_a_replacement_of_deepspeeds_clip(staged):
    """Both clip at 1.0: the consumed gradients differ by one scale first. DeepSpeed has no
    key for Megatron's clip coefficient; the tool's replacement of DeepSpeed's clip is
    tried, and with it and the next proven policy every boundary matches."""
    from triage_agent.config import load_case
    from triage_agent.correspond.align import Budget
    from triage_agent.correspond.table import align_markdown
    from triage_agent.correspond.workflow import align_case

    case = load_case(staged[0].parent / "triage_clip.toml")
    r = align_case(case, staged[1] / "clip", [], budget=Budget(reruns=2, minutes=6))
    t = r.alignment
    print(align_markdown(t))
    first = t.walk[0]
    assert (first.step, first.boundary) == (0, "grads"), first
    assert first.policy is not None and first.policy.kind == "gradient-scale", first.policy
    tried = [a.candidate.intervention for a in first.attempts]
    assert any("unscale_and_clip_grads" in i for i in tried), tried
    # measured on one H200: Megatron's coefficient form alone aligns the gradients (the two
    # fp32 norms agree there), then B's decay flag the master weights
    assert first.proven_by is not None and "unscale_and_clip_grads" in first.proven_by, first
    assert t.aligned.first is None, align_markdown(t)
    assert [row.aligned for row in t.rows] == ["match"] * 5

"""The rerun the state at the step boundaries will ask for, started beside its capture,
and stage 1 run while the capture's relaunches do.

A plain-torch job whose resume does not bring back the torch RNG stream: the manifests
propose restore-rng on the resumed run. When stage 1 already supports an RNG-state cause,
that rerun is launched beside the capture, so the arm that tests it finds it finished and
launches nothing. Without such support, nothing extra is launched.
"""

from __future__ import annotations

import pytest
from test_workflow_support import resume_case, resume_job

from triage_agent.ledger import Ledger
from triage_agent.records import Case, EvidenceKind, Hypothesis
from triage_agent.runs import launches_started
from triage_agent.workflow.arms import try_arm
from triage_agent.workflow.boundary_state import boundary_arms, likely_reruns
from triage_agent.workflow.characterize import characterize

TRAIN = resume_job("x + 0.1 * torch.rand(16, 6)", "x = torch.ones(16, 6)")

RNG_CAUSE = Hypothesis(
    id="H-stage1-rng",
    statement="checkpoint save/load omits RNG state",
    category="rng-state",
    rationale="a stage-1 reproducer supported it",
)


def _case(tmp_path) -> Case:
    (tmp_path / "train.py").write_text(TRAIN)
    return resume_case(tmp_path, "rng-resume", 5, 2)


def test_only_a_supported_rng_cause_and_a_resuming_run_start_a_rerun_early(tmp_path):
    case = _case(tmp_path)
    assert likely_reruns(case, [RNG_CAUSE]) == [("b", "restore-rng")]
    other = RNG_CAUSE.model_copy(update={"category": "nondeterminism"})
    assert likely_reruns(case, [other]) == []
    assert likely_reruns(case, []) == []


@pytest.mark.slow
def test_the_resume_arm_reuses_the_rerun_started_beside_the_capture(tmp_path):
    from triage_agent.runs import materialize_case

    case = _case(tmp_path)
    ledger = Ledger(case.workspace)
    a, b = materialize_case(case, tmp_path / "ws")
    rep = characterize(case, None, a.metrics, b.metrics)
    assert rep.step == 3
    calls: list[int] = []

    def stage1():  # what the engine runs in this thread while the state relaunches run
        calls.append(launches_started() - before)
        return [RNG_CAUSE]

    before = launches_started()
    arms = boundary_arms(case, ledger, rep, timeout_s=120, deadline=float("inf"), meanwhile=stage1)
    # A once, B twice for the state; B's rerun under restore-rng twice beside it, started
    # once stage 1 (run meanwhile, once) had supported an RNG-state cause; stage 1 began
    # once both state relaunches had started, so their launches count in the state's stage
    assert launches_started() - before == 5 and len(calls) == 1 and calls[0] >= 2
    arm = next(a for a in arms if a.intervention == "restore-rng")
    assert arm.run == "b" and "torch_cpu" in arm.location
    before = launches_started()
    ev = try_arm(case, ledger, arm, timeout_s=120)
    assert launches_started() == before, "the arm launched its rerun again"
    assert ev is not None and ev.kind == EvidenceKind.rerun
    assert ev.data.rerun["cached"] is True and ev.data.common_steps == 6
    assert ev.hypotheses == [arm.hypothesis.id]
    # resumed: the state is in the ledger; stage 1 still runs once, nothing is launched
    before = launches_started()
    again = boundary_arms(case, ledger, rep, timeout_s=120, deadline=float("inf"), meanwhile=stage1)
    assert again == arms and len(calls) == 2 and launches_started() == before

"""Baselines launched with the mismatch step known capture the state at the step boundaries
as they run, and the state check reads it from them instead of relaunching both runs.

A plain-torch job whose resume does not bring back the torch RNG stream (run B saves at
step 2 and resumes in a new process). Launched with ``state_after``, the baselines write
the same records a state relaunch writes, their metrics are the bits an uncaptured launch
writes (the capture only reads), and the state check proposes the same arm as from a
relaunch while launching nothing but that arm's rerun, which it starts beside stage 1.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_workflow_support import resume_case, resume_job

from triage_agent.ledger import Ledger
from triage_agent.runs import STATE_RECORDS, finished, launches_started, materialize_case
from triage_agent.workflow.arms import try_arm
from triage_agent.workflow.boundary_state import boundary_arms
from triage_agent.workflow.characterize import characterize

TRAIN = resume_job("x + 0.1 * torch.rand(16, 6)", "x = torch.ones(16, 6)")


def finished_dir(outcome) -> Path:
    return Path(outcome.out_dir)


def _metric_bytes(outs) -> dict[str, list[str]]:
    """Every step record's line, per run and rank file (a session line holds pid and time)."""
    return {
        f"{o.run}/{p.name}": [ln for ln in p.read_text().splitlines() if '"type":"step"' in ln]
        for o in outs
        for p in sorted(Path(o.metrics).glob("metrics_rank*.jsonl"))
    }


@pytest.mark.slow
def test_the_state_captured_by_the_baselines_spares_the_state_relaunch(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    case = resume_case(tmp_path, "rng-resume", 5, 2)
    plain = materialize_case(case, tmp_path / "plain")
    captured = materialize_case(case, tmp_path / "ws", state_after=2)
    assert [o.state_after for o in plain] == [None, None]
    assert [o.state_after for o in captured] == [2, 2]
    # the capture only reads: every metric bit of both runs as without it
    assert {k.split("/")[0] for k, lines in _metric_bytes(plain).items() if lines} == {"a", "b"}
    assert _metric_bytes(plain) == _metric_bytes(captured)
    # A ran through (init, after-2, step-3); B saved at 2 (its state as the checkpoint was
    # written: end-2) and a new process resumed from it
    points = {
        o.run: sorted(p.name.split("-rank")[0] for p in (finished_dir(o) / STATE_RECORDS).glob("*"))
        for o in captured
    }
    assert points["a"] == ["state-after-2", "state-init", "state-step-3"]
    assert points["b"] == [
        "state-after-2",
        "state-after-2",
        "state-end-2",
        "state-init",
        "state-step-3",
    ]

    rep = characterize(case, None, captured[0].metrics, captured[1].metrics)
    assert rep.step == 3
    calls: list[int] = []

    def stage1():  # what the engine runs in this thread meanwhile
        calls.append(launches_started() - before)
        return []

    ledger = Ledger(case.workspace)
    before = launches_started()
    arms = boundary_arms(case, ledger, rep, timeout_s=120, deadline=float("inf"), meanwhile=stage1)
    # no state relaunch: B's rerun under the arm's intervention alone (two commands), its
    # first started before stage 1 ran (once)
    assert launches_started() - before == 2 and len(calls) == 1 and calls[0] >= 1
    assert [(a.run, a.intervention) for a in arms] == [("b", "restore-rng")]
    assert "torch_cpu" in arms[0].location
    before = launches_started()
    ev = try_arm(case, ledger, arms[0], timeout_s=120)
    assert launches_started() == before, "the arm launched its rerun again"
    assert ev is not None and ev.data.rerun["cached"] is True and ev.data.common_steps == 6

    said = [e.data.differences for e in ledger.state().evidence if e.kind == "manifest"]

    # the same arm and the same differences as the state relaunch finds from plain baselines
    shutil.rmtree(tmp_path / "ws")
    for o in plain:
        shutil.copytree(finished_dir(o), tmp_path / "ws" / "runs" / o.run / finished_dir(o).name)
    assert all(finished(r, tmp_path / "ws").state_after is None for r in (case.run_a, case.run_b))
    fresh = Ledger(case.workspace)
    before = launches_started()
    again = boundary_arms(case, fresh, rep, timeout_s=120, deadline=float("inf"))
    assert launches_started() - before == 3  # A once, B twice: the relaunch
    same = {"hypothesis": {"created"}}
    assert [a.model_dump(exclude=same) for a in again] == [a.model_dump(exclude=same) for a in arms]
    said_again = [e.data.differences for e in fresh.state().evidence if e.kind == "manifest"]
    assert said == said_again and said[0]

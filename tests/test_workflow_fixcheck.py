"""What a fix check records about the relaunches behind its evidence."""

from __future__ import annotations

from pathlib import Path

from test_workflow_support import linear_train

from triage_agent.ledger import Ledger
from triage_agent.records import Case, EvidenceResult, RunSpec
from triage_agent.runs import materialize_case
from triage_agent.workflow.fixcheck import validate_fix

# run b passes a second argument: its weight is nudged between steps 0 and 1
TRAIN = linear_train(
    3, "if step == 1 and len(sys.argv) > 2:\n            model.weight.data[0, 0] += 1e-3"
)


def test_a_two_launch_rerun_of_both_runs_records_every_argv_and_the_summed_time(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    pause = ["{python}", "-c", "import time; time.sleep(0.3)"]
    case = Case(
        name="nudge",
        workspace=str(tmp_path / "ws"),
        run_a=RunSpec(
            name="a", metrics="{out}", cwd=str(tmp_path), launch=[["{python}", "train.py", "{out}"]]
        ),
        run_b=RunSpec(
            name="b",
            metrics="{out}",
            cwd=str(tmp_path),
            launch=[pause, ["{python}", "train.py", "{out}", "nudge"]],
        ),
        timeout_s=120,
    )
    ledger = Ledger(case.workspace)
    ledger.record_case(case)
    base_a, _ = materialize_case(case, Path(case.workspace))
    # no policy undoes the nudge: B alone, then A and B; deterministic algorithms move no bit
    # of this job, so the check is not applicable rather than a refutation
    ev = validate_fix(case, ledger, "deterministic", [], base_a.metrics, timeout_s=120)
    assert ev.result == EvidenceResult.not_applicable and ev.data.applied_to == "A and B"
    assert ev.summary.startswith("not applicable: policy 'deterministic'")
    rec = ev.data.rerun
    assert rec["runs"] == ["b", "a"] and rec["launches"] == 3
    assert all(isinstance(c, list) and ";" not in c for c in rec["commands"])
    assert rec["commands"][0][-1].startswith("import time")
    assert rec["seconds"] >= 0.3 and ev.duration_s == rec["seconds"]
    # the provenance once, as the evidence's own
    assert "provenance" not in rec and ev.provenance is not None
    # B's relaunch is two commands: no single command line stands for it
    assert ev.argv is None

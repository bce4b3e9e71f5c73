"""A launch that wrote every step and then exited abnormally: completed, with the exit kept.

Each job is a real process that writes its metric fingerprints with ``MetricLog`` for two
ranks and then ends the way the case asks: exit 0, ``os.abort()`` (SIGABRT, as a gloo
teardown does), or an exit status, after every step or before the last one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from triage_agent.ledger import Ledger
from triage_agent.records import Case, Classification, RunSpec, Verdict
from triage_agent.runs import materialize, materialize_case

JOB = """
import os, sys
from triage_agent.metrics import MetricLog
out, steps, end = sys.argv[1], int(sys.argv[2]), sys.argv[3]
logs = [MetricLog(out, rank=r) for r in (0, 1)]
for step in range(steps):
    for r, log in enumerate(logs):
        log.log(step, loss=1.0 / (step + 1 + r))
sys.stderr.write("terminate called without an active exception\\n")
if end == "abort":
    os.abort()
if end == "exit3":
    sys.exit(3)
if end == "hang":
    import time; time.sleep(60)
"""


def _case(tmp_path: Path, a: list[str], b: list[list[str]] | None = None) -> Case:
    job = tmp_path / "job.py"
    job.write_text(JOB)

    def spec(name: str, cmds: list[list[str]]) -> RunSpec:
        launch = [["{python}", str(job), "{out}/metrics", *c] for c in cmds]
        return RunSpec(name=name, metrics="{out}/metrics", launch=launch, cwd=str(tmp_path))

    return Case(
        run_a=spec("a", [a]),
        run_b=spec("b", b or [["6", "abort"]]),
        workspace=str(tmp_path / "ws"),
        timeout_s=30,
    )


def test_every_step_written_then_sigabrt_is_completed_with_the_exit_recorded(tmp_path):
    a, b = materialize_case(_case(tmp_path, ["6", "clean"]), check=False)
    assert a.ok and a.abnormal_exit is None
    assert b.ok and b.error is None and b.exit_codes == [-6]
    ab = b.abnormal_exit
    assert ab is not None and ab.signal == "SIGABRT" and ab.exit_status == -6
    assert ab.command == 1 and ab.reference == "a"
    assert ab.stderr_tail[-1] == "terminate called without an active exception"
    said = ab.said("b")
    assert "every step run a wrote" in said and "SIGABRT" in said
    # the record is the cache: the run is reused as completed, never launched again
    again = materialize_case(_case(tmp_path, ["6", "clean"]), check=False)
    assert again[1].cached and again[1].abnormal_exit == ab


def test_an_abnormal_exit_before_the_last_step_is_a_failed_run(tmp_path):
    a, b = materialize_case(_case(tmp_path, ["6", "clean"], [["5", "abort"]]), check=False)
    assert a.ok and not b.ok and b.abnormal_exit is None
    assert "exited -6" in (b.error or "")
    # and nothing was cached for it: the next attempt launches again
    assert not (Path(b.out_dir) / "outcome.json").exists()


def test_an_exit_status_after_every_step_is_kept_with_its_status(tmp_path):
    _, b = materialize_case(_case(tmp_path, ["4", "clean"], [["4", "exit3"]]), check=False)
    assert b.ok and b.abnormal_exit is not None
    assert b.abnormal_exit.exit_status == 3 and b.abnormal_exit.signal is None


def test_both_runs_ending_abnormally_leave_no_reference_and_both_fail(tmp_path):
    a, b = materialize_case(_case(tmp_path, ["4", "abort"], [["4", "abort"]]), check=False)
    assert not a.ok and not b.ok


def test_an_earlier_command_that_failed_is_never_excused(tmp_path):
    # a resume whose first process died: the second wrote the rest, the run is still failed
    case = _case(tmp_path, ["6", "clean"], [["3", "exit3"], ["6", "clean"]])
    _, b = materialize_case(case, check=False)
    assert not b.ok and b.exit_codes == [3] and b.abnormal_exit is None


def test_a_timeout_after_every_step_is_never_excused(tmp_path):
    case = _case(tmp_path, ["4", "clean"], [["4", "hang"]]).model_copy(update={"timeout_s": 8})
    a, b = materialize_case(case, check=False)
    assert a.ok and not b.ok and b.timed_out and b.abnormal_exit is None


def test_a_single_run_with_nothing_to_compare_stays_failed(tmp_path):
    case = _case(tmp_path, ["6", "clean"])
    out = materialize(case.run_b, tmp_path / "ws", "baseline", timeout_s=30)
    assert not out.ok and out.abnormal_exit is None
    assert json.loads(out.model_dump_json())["abnormal_exit"] is None


def test_triage_run_reports_the_abnormal_exit_beside_equal_runs(tmp_path):
    import subprocess

    (tmp_path / "job.py").write_text(JOB)
    job = ["{python}", "job.py", "{out}/metrics"]
    toml = tmp_path / "triage.toml"
    toml.write_text(
        '[case]\nname = "teardown"\nworkspace = "ws"\ntimeout_s = 60\n'
        f'[runs.a]\nmetrics = "{{out}}/metrics"\nlaunch = [{json.dumps([*job, "6", "clean"])}]\n'
        f'[runs.b]\nmetrics = "{{out}}/metrics"\nlaunch = [{json.dumps([*job, "6", "abort"])}]\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "run", "--case", str(toml)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = " ".join(done.stdout.split())
    assert "no divergence to explain" in out
    assert "caveat: run b wrote every step run a wrote" in out and "SIGABRT" in out
    st = Ledger(tmp_path / "ws").state()
    held = [n for n in st.notes if n.get("caveat")]
    assert len(held) == 1 and held[0]["abnormal_exit"]["signal"] == "SIGABRT"
    md = next((tmp_path / "ws").rglob("report.md")).read_text()
    assert "**caveat**: run b wrote every step" in md


def test_every_verdict_carries_the_caveats_the_ledger_holds(tmp_path):
    ledger = Ledger(tmp_path / "ws")
    ledger.caveat("run b exited abnormally after its last step")
    v = ledger.set_verdict(
        Verdict(classification=Classification.unknown, statement="nothing proven")
    )
    assert v.caveats == ["run b exited abnormally after its last step"]
    assert ledger.state().verdict.caveats == v.caveats

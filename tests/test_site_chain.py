"""Start-up hooks chain to the ``sitecustomize`` they shadow, each exactly once."""

import shutil
import subprocess
import sys

from triage_agent.boundary_capture import INJECT_DIR


def test_two_copies_of_the_hook_on_one_path_run_the_jobs_own_once(tmp_path):
    # a checkout's hook and the installed one in one launch: each finds the other's
    other = tmp_path / "checkout" / "boundary_inject"
    other.mkdir(parents=True)
    shutil.copy(INJECT_DIR / "sitecustomize.py", other / "sitecustomize.py")
    job = tmp_path / "job"
    job.mkdir()
    (job / "sitecustomize.py").write_text("print('job hook')\n")
    done = subprocess.run(
        [sys.executable, "-c", "print('script')"],
        env={"PYTHONPATH": f"{other}:{INJECT_DIR}:{job}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "RecursionError" not in done.stderr and "Error in sitecustomize" not in done.stderr
    assert done.stdout.splitlines() == ["job hook", "script"]

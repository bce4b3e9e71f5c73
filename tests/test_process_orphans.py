"""Nothing a runner launched outlives the runner's own death by SIGKILL.

Each command runs in a session of its own (so that a timeout ends its whole group), which
also takes it out of reach of whatever kills the runner: here a Python process running
:func:`run_process` is killed with SIGKILL while its command, a child of that command (in
its group) and a daemon that left the group with ``setsid`` all sleep. Within a few seconds
none of them may be running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

ROOT = Path(__file__).resolve().parents[1]

# The launched command: it forks a child that stays in its group and a daemon (double fork,
# new session, SIGTERM ignored), writes the three pids, and sleeps.
JOB = textwrap.dedent(
    """
    import os, signal, sys, time
    child = os.fork()
    if child == 0:
        time.sleep(300)
        os._exit(0)
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.write(w, str(os.getpid()).encode())
            time.sleep(300)
        os._exit(0)
    daemon = int(os.read(r, 32))
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child} {daemon}")
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(300)
    """
)

# The runner, as `triage run` uses it: the command is launched from a worker thread.
RUNNER = textwrap.dedent(
    """
    import os, sys, time
    from concurrent.futures import ThreadPoolExecutor
    from triage_agent.process import run_process

    job, pids, d, fork = sys.argv[1:5]
    def launch():
        return run_process([sys.executable, "-c", job, pids], cwd=d, env={"PATH": "/usr/bin:/bin"},
                           timeout_s=300, stdout_path=d + "/out", stderr_path=d + "/err",
                           housekeeping=False)
    with ThreadPoolExecutor(1) as pool:
        done = pool.submit(launch)
        if fork == "fork":
            # a forked child (a worker pool's, say) outlives the runner, holding its fds
            while not os.path.exists(pids):
                time.sleep(0.02)
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            open(d + "/forked", "w").close()
        done.result()
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.parametrize("fork", ["", "fork"])
def test_jobs_end_when_their_runner_is_killed_with_sigkill(tmp_path, fork):
    pidfile = tmp_path / "pids"
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, JOB, str(pidfile), str(tmp_path), fork],
        start_new_session=True,  # its forked child is ended with its group below
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    launched: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists() or (fork and not (tmp_path / "forked").exists()):
            assert runner.poll() is None, "the runner exited before its command started"
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        launched = [int(p) for p in pidfile.read_text().split()]
        assert all(map(_alive, launched)), launched
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 10
        while any(map(_alive, launched)) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in launched if _alive(p)]
        assert left == [], f"processes of the killed runner's command still running: {left}"
    finally:
        runner.kill()
        try:
            os.killpg(runner.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in filter(_alive, launched):
            os.kill(pid, signal.SIGKILL)


CASE = """
[case]
name = "orphans"

[runs.a]
metrics = "{out}/metrics"
launch = [["PYTHON", "-c", "import sys, time; time.sleep(120)", "MARK-a", "{out}"]]

[runs.b]
metrics = "{out}/metrics"
launch = [["PYTHON", "-c", "import sys, time; time.sleep(120)", "MARK-b", "{out}"]]
"""


def _running(mark: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        try:
            if (
                d.name.isdigit()
                and mark.encode() in (d / "cmdline").read_bytes()
                and _alive(int(d.name))
            ):
                found.append(int(d.name))
        except OSError:
            pass
    return found


def test_a_killed_triage_run_leaves_no_baseline_running(tmp_path):
    """The real CLI: `triage run` launches both baselines side by side, and is killed with
    SIGKILL while they run."""
    mark = f"orphan-{tmp_path.name}"
    (tmp_path / "triage.toml").write_text(
        CASE.replace("PYTHON", sys.executable).replace("MARK", mark)
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "triage_agent.cli.app", "run"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    left: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while len(_running(mark)) < 2:
            assert run.poll() is None, "triage run ended before both baselines started"
            assert time.monotonic() < deadline, "the baselines never started"
            time.sleep(0.1)
        run.send_signal(signal.SIGKILL)
        run.wait()
        deadline = time.monotonic() + 10
        while _running(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _running(mark)
        assert left == [], f"baselines of the killed run still running: {left}"
    finally:
        run.kill()
        for pid in left:
            os.kill(pid, signal.SIGKILL)

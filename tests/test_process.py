"""The process runner: nothing of a command survives it, whatever the command does.

Each command is a short ``python -c`` program that leaves something running behind its
leader: a child still writing a file after the leader exits 0, a child that ignores
SIGTERM, a grandchild that daemonises out of the session. The runner returns only when all
of it is gone. The same programs are run through the capture command and the reproducer
launcher, which both start processes through the runner.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from triage_agent.errors import InputError
from triage_agent.process import MARKER_ENV, ProcessResult, run_process

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

# The leader starts a child that appends to a file every 20 ms for a minute, waits until it
# has written once, and exits 0. The child may ignore SIGTERM, and may leave the session.
LEAVES_A_WRITER = textwrap.dedent(
    """
    import os, signal, sys, time
    out, pidfile, mode = sys.argv[1], sys.argv[2], sys.argv[3]

    def write_forever():
        if mode == "ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(pidfile, "w") as f:
            f.write(str(os.getpid()))
        for _ in range(3000):
            with open(out, "a") as f:
                f.write("x")
            time.sleep(0.02)

    if os.fork() == 0:
        if mode == "daemon":  # the classic double fork: a new session, then the grandchild
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
        write_forever()
        os._exit(0)
    while not (os.path.exists(out) and os.path.getsize(out) > 0):
        time.sleep(0.01)
    print("leader done", flush=True)
    """
)


def alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def wait_pidfile(p: Path) -> int:
    for _ in range(500):
        if p.exists() and p.read_text():
            return int(p.read_text())
        time.sleep(0.01)
    raise AssertionError(f"{p} was never written")


def assert_stopped(out: Path, pid: int) -> None:
    """The writer is gone and the file it wrote no longer grows."""
    assert not alive(pid), f"process {pid} outlived the runner"
    size = out.stat().st_size
    time.sleep(0.3)
    assert out.stat().st_size == size, "the file still grows after the runner returned"


def run(tmp_path: Path, argv: list[str], **kw) -> ProcessResult:
    env = {"PATH": os.environ["PATH"]}
    opts = {"timeout_s": 60.0, **kw}
    return run_process(
        argv,
        cwd=tmp_path,
        env=env,
        stdout_path=tmp_path / "out.txt",
        stderr_path=tmp_path / "err.txt",
        **opts,
    )


@pytest.mark.parametrize("mode", ["plain", "ignore-term", "daemon"])
def test_run_process_ends_what_outlives_a_leader_that_exits_0(tmp_path, mode):
    out, pidfile = tmp_path / "grows.txt", tmp_path / "writer.pid"
    argv = [sys.executable, "-c", LEAVES_A_WRITER, str(out), str(pidfile), mode]
    res = run(tmp_path, argv, grace_s=1.0)
    assert res.returncode == 0 and not res.timed_out
    writer = wait_pidfile(pidfile)
    assert_stopped(out, writer)
    assert writer in res.strays and any("outlived its leader" in n for n in res.notes)
    assert (tmp_path / "out.txt").read_text() == "leader done\n"


def test_run_process_kills_a_leader_that_ignores_sigterm_past_its_timeout(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    t0 = time.monotonic()
    res = run(tmp_path, [sys.executable, "-c", code], timeout_s=1.0, grace_s=0.5)
    assert res.timed_out and res.returncode is None
    assert time.monotonic() - t0 < 10
    assert res.pid is not None and not alive(res.pid)


def test_run_process_environment_is_exactly_the_one_given(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_TEST_SECRET", "s3cret")
    code = "import os; print(sorted(k for k in os.environ if k != 'LC_CTYPE'))"
    res = run_process(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"ONLY_THIS": "1"},
        timeout_s=60,
        stdout_path=tmp_path / "o",
        stderr_path=tmp_path / "e",
    )
    assert res.returncode == 0, (tmp_path / "e").read_text()
    assert (tmp_path / "o").read_text().strip() == str(sorted(["ONLY_THIS", MARKER_ENV]))
    again = run_process(
        [sys.executable, "-c", "pass"],
        cwd=tmp_path,
        env={"ONLY_THIS": "2"},
        timeout_s=60,
        stdout_path=tmp_path / "o",
        stderr_path=tmp_path / "e",
    )
    assert again.env_sha256 != res.env_sha256  # the provenance tells the environments apart


def test_run_process_argv_is_never_a_shell_line_and_records_what_ran(tmp_path):
    arg = "a b; echo injected > pwned"
    res = run(tmp_path, [sys.executable, "-c", "import sys; print(sys.argv[1])", arg])
    assert (tmp_path / "out.txt").read_text() == arg + "\n"
    assert not (tmp_path / "pwned").exists()
    assert res.argv[-1] == arg
    assert res.executable and Path(res.executable) == Path(sys.executable).resolve()
    assert res.cwd == str(tmp_path.resolve()) and res.started and res.host and res.pid
    assert res.duration_s > 0


def test_run_process_caps_output_and_drains_the_rest(tmp_path):
    code = "import sys; sys.stdout.write('x' * 3_000_000); sys.stderr.write('e')"
    res = run(tmp_path, [sys.executable, "-c", code], output_cap=10_000)
    assert res.returncode == 0 and res.stdout_truncated and not res.stderr_truncated
    assert (tmp_path / "out.txt").stat().st_size == 10_000
    assert (tmp_path / "err.txt").read_text() == "e"


def test_run_process_refuses_bad_commands_in_one_line(tmp_path):
    with pytest.raises(InputError, match="non-empty list"):
        run(tmp_path, [])
    with pytest.raises(InputError, match="non-empty list"):
        run(tmp_path, [sys.executable, ""])
    with pytest.raises(InputError, match="cannot start 'no-such-program-xyz'"):
        run(tmp_path, ["no-such-program-xyz"])
    with pytest.raises(InputError, match="timeout"):
        run(tmp_path, [sys.executable, "-c", "pass"], timeout_s=0)


def test_capture_command_reads_the_trace_dir_only_after_every_rank_ended(tmp_path):
    from triage_agent.fingerprint import CaptureConfig, capture_command

    out, pidfile = tmp_path / "grows.txt", tmp_path / "writer.pid"
    argv = [sys.executable, "-c", LEAVES_A_WRITER, str(out), str(pidfile), "plain"]
    res = capture_command(argv, CaptureConfig(out_dir=tmp_path / "t", level="none"), timeout_s=60)
    assert res.exit_code == 0
    assert_stopped(out, wait_pidfile(pidfile))
    assert any("outlived its leader" in w for w in res.warnings)


def test_reproducer_launcher_reaps_a_daemonised_grandchild(tmp_path):
    from reproducers.launcher import EnvPolicy, run_argv

    out, pidfile = tmp_path / "grows.txt", tmp_path / "writer.pid"
    argv = [sys.executable, "-c", LEAVES_A_WRITER, str(out), str(pidfile), "daemon"]
    res = run_argv(argv, tmp_path, EnvPolicy().build(), timeout_s=60)
    assert res.returncode == 0
    assert_stopped(out, wait_pidfile(pidfile))

"""Commands run side by side in worker threads end when the main thread is interrupted:
Ctrl-C reaches the main thread only, and the workflow launches runs A and B in threads."""

import sys
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from triage_agent.process import Cancelled, end_side_by_side, run_process


def _python(tmp_path, code, name, timeout_s=300):
    return run_process(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout_s=timeout_s,
        stdout_path=tmp_path / f"{name}.out",
        stderr_path=tmp_path / f"{name}.err",
        housekeeping=False,
    )


def _sleeper(tmp_path, name):
    return _python(tmp_path, "import time; time.sleep(120)", name)


def test_ending_side_by_side_commands_ends_both_groups_at_once(tmp_path):
    pool = ThreadPoolExecutor(2)
    futures = [pool.submit(_sleeper, tmp_path, n) for n in ("a", "b")]
    deadline = time.monotonic() + 30
    while len(_sleepers()) < 2:
        assert time.monotonic() < deadline, "the commands never started"
        time.sleep(0.05)
    t0 = time.monotonic()
    end_side_by_side(pool)
    assert time.monotonic() - t0 < 20  # not the 120 s the commands would have run
    for f in futures:
        with pytest.raises(Cancelled):
            f.result()
    assert _sleepers() == []
    # the request is scoped to that pool: a later command runs normally
    out = _python(tmp_path, "print('ok')", "c", timeout_s=60)
    assert out.returncode == 0


def _sleepers():
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if cmd[-1:] == ["import time; time.sleep(120)"]:
            found.append(p.pid)
    return found

"""Dead build locks (a JIT build killed mid-way) are found, removed at launch, and reported."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_launcher import GOOD, _install

from reproducers.launcher import launch
from triage_agent.fingerprint import CaptureConfig, capture_command
from triage_agent.jit_ops import clear_stale_locks, lock_files, stale_locks

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")

# What torch's extension loader does: take the baton or wait for its holder to finish.
WAITER = """
import os
from torch.utils.file_baton import FileBaton
lock = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "py_cpu", "op", "lock")
os.makedirs(os.path.dirname(lock), exist_ok=True)
baton = FileBaton(lock)
if baton.try_acquire():
    baton.release()
else:
    baton.wait()
"""

# A builder that takes the baton and is killed before it releases it.
HOLDER = """
import os, time
from torch.utils.file_baton import FileBaton
lock = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "py_cpu", "op", "lock")
os.makedirs(os.path.dirname(lock), exist_ok=True)
assert FileBaton(lock).try_acquire()
print("holding", flush=True)
time.sleep(600)
"""


@pytest.fixture
def ext_dir(tmp_path, monkeypatch):
    d = tmp_path / "torch_extensions"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(d))
    return d


def _dead_lock(ext_dir: Path) -> Path:
    lock = ext_dir / "py_cpu" / "op" / "lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    return lock


def test_a_lock_held_open_is_live_and_a_closed_one_is_dead(ext_dir):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        lock = ext_dir / "py_cpu" / "op" / "lock"
        assert lock_files() == [lock]
        assert stale_locks() == []
        assert clear_stale_locks() == [] and lock.exists()
    finally:
        holder.kill()
        holder.wait()
    assert stale_locks() == [lock]
    assert clear_stale_locks() == [str(lock)] and not lock.exists()


def test_launch_clears_a_dead_lock_the_program_would_wait_on_forever(ext_dir, tmp_path):
    lock = _dead_lock(ext_dir)
    rid = _install(tmp_path / "ws", WAITER + f"import json; print(json.dumps({GOOD!r}))\n")
    ev = launch(rid, tmp_path / "ws", timeout_s=60)
    assert ev.result.value == "supported", ev.summary
    assert not lock.exists()
    assert any(str(lock) in n for n in ev.data.launch_notes)


def test_launch_killed_mid_build_removes_the_lock_it_left(ext_dir, tmp_path):
    rid = _install(tmp_path / "ws", HOLDER)
    ev = launch(rid, tmp_path / "ws", timeout_s=5)
    lock = ext_dir / "py_cpu" / "op" / "lock"
    assert ev.result.value == "error" and "timed out" in ev.summary
    assert "build lock" in ev.summary and not lock.exists()
    # the next launch of a program that waits on that lock is not hung by it
    rid2 = _install(tmp_path / "ws", WAITER + f"import json; print(json.dumps({GOOD!r}))\n")
    t0 = time.monotonic()
    ev2 = launch(rid2, tmp_path / "ws", timeout_s=60)
    assert ev2.result.value == "supported" and time.monotonic() - t0 < 60


def test_traced_command_timeout_removes_the_lock_and_warns(ext_dir, tmp_path):
    prog = tmp_path / "holder.py"
    prog.write_text(HOLDER)
    res = capture_command(
        [sys.executable, str(prog)],
        CaptureConfig(out_dir=str(tmp_path / "trace")),
        timeout_s=5,
    )
    assert res.timed_out
    assert not (ext_dir / "py_cpu" / "op" / "lock").exists()
    assert any("build lock" in w for w in res.warnings)


def test_cli_ops_locks_lists_and_clears(ext_dir):
    lock = _dead_lock(ext_dir)
    triage = [sys.executable, "-m", "triage_agent.cli.app"]
    out = subprocess.run([*triage, "ops", "locks"], capture_output=True, text=True, check=True)
    assert f"dead  {lock}" in out.stdout and lock.exists()
    out = subprocess.run(
        [*triage, "ops", "locks", "--clear"], capture_output=True, text=True, check=True
    )
    assert "removed 1 dead lock" in out.stdout and not lock.exists()


def test_cli_ops_build_refuses_an_unknown_builder_in_one_line(ext_dir):
    triage = [sys.executable, "-m", "triage_agent.cli.app"]
    out = subprocess.run([*triage, "ops", "build", "--op", "NoSuchBuilder"], capture_output=True)
    err = out.stderr.decode()
    assert out.returncode == 1
    assert "NoSuchBuilder is not an op builder" in err and "Traceback" not in err


def test_ops_build_builds_the_native_tracer_that_injected_traces_use(monkeypatch):
    from triage_agent.fingerprint.native import loader
    from triage_agent.jit_ops import DEFAULT_OPS, NATIVE_OP, build_ops

    assert NATIVE_OP in DEFAULT_OPS  # `triage ops build` with no --op (and `make ops`) builds it
    results, _ = build_ops([NATIVE_OP])
    (r,) = results
    assert (r.op, r.name, r.status) == (NATIVE_OP, loader.build_name(), "ready"), r.detail
    lib, why = loader.built_library()
    assert lib is not None and lib.parent == loader.build_directory(r.name), why
    monkeypatch.setenv(loader.DISABLE_ENV, "0")
    (off,), _ = build_ops([NATIVE_OP])
    assert off.status == "skipped" and "TRIAGE_NATIVE=0" in off.detail

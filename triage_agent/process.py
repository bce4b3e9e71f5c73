"""The one way this project runs a command: :func:`run_process`.

Every launch (a case's training command, a traced relaunch, a reproducer) goes through here,
so they all behave the same way:

- argv only, never a shell string;
- the environment is exactly the mapping the caller passes, nothing inherited behind its
  back (callers build it: :func:`triage_agent.runs.launch_env`, the launcher's ``EnvPolicy``);
- the command runs in its own session and process group, and every process started from it
  carries a marker variable in its environment;
- when the leader ends - past its timeout, on Ctrl-C, and also after a normal exit - every
  process of its group and every process carrying the marker (a daemon that called
  ``setsid`` left the group, not the marker) gets SIGTERM, then SIGKILL after a grace period,
  and the runner waits until they are gone before it returns. Ranks that outlive a
  normally exiting launcher can otherwise still be writing the trace directory while it is
  read; the pids ended that way are returned as ``strays``;
- stdout and stderr go to files, each capped in size (the rest is drained, not kept);
- what dead jobs left that would hang this one (a C++ build lock no process holds, DeepSpeed
  shm buffers no process maps) is removed before and after, in one place
  (:func:`clear_leftovers`), and said in ``housekeeping``;
- the result says what ran: the resolved program, argv, cwd, a digest of the environment,
  host, pid, start time and duration.

Limits: a process that clears its whole environment *and* leaves the session escapes the
marker and the group; without /proc (not Linux) only the process group is ended.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import Executor
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, Field

from .errors import InputError
from .jit_ops import clear_stale_locks, lock_notes
from .records import utcnow
from .shm_buffers import buffer_note, clear_dead_buffers

DEFAULT_OUTPUT_CAP = 4 << 20
MARKER_ENV = "TRIAGE_PROCESS_MARK"
KILL_GRACE_S = 3.0
PROC = Path("/proc")


class ProcessResult(BaseModel):
    """What one command did, before anyone interprets it, and what exactly ran."""

    argv: list[str]
    returncode: int | None = Field(description="the leader's exit status; None when timed out")
    timed_out: bool
    duration_s: float
    stdout_path: str
    stderr_path: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    cwd: str = ""
    executable: str | None = Field(default=None, description="argv[0] resolved on PATH")
    env_sha256: str = Field(default="", description="digest of the environment it was given")
    host: str = ""
    pid: int | None = None
    started: str = ""
    strays: list[int] = Field(
        default_factory=list,
        description="processes of the command still running after its leader ended, ended here",
    )
    removed_locks: list[str] = Field(
        default_factory=list, description="dead C++ build locks removed around the run"
    )
    housekeeping: list[str] = Field(
        default_factory=list, description="dead DeepSpeed shm buffers removed around the run"
    )

    @property
    def warnings(self) -> list[str]:
        """What a reader of the outputs should know: an op to rebuild, processes ended."""
        said = lock_notes(self.removed_locks)
        if self.strays:
            said.append(
                f"{len(self.strays)} process(es) of the command outlived its leader and were "
                f"ended before its outputs were read (pids {self.strays[:8]})"
            )
        return said

    @property
    def notes(self) -> list[str]:
        return self.warnings + self.housekeeping


class Leftovers(BaseModel):
    locks: list[str] = Field(default_factory=list)
    buffers: list[str] = Field(default_factory=list)


def clear_leftovers() -> Leftovers:
    """Remove what dead jobs left that would hang a launch; say what was removed."""
    return Leftovers(locks=clear_stale_locks(), buffers=buffer_note(*clear_dead_buffers()))


def _pump(stream: BinaryIO, path: Path, cap: int, truncated: list[bool]) -> None:
    """Copy a pipe to a file, keeping the first ``cap`` bytes and draining the rest."""
    written = 0
    with open(path, "wb") as f:
        for chunk in iter(lambda: stream.read(65536), b""):
            if written < cap:
                keep = chunk[: cap - written]
                f.write(keep)
                f.flush()  # readable while the command runs (a progress watcher, a person)
                written += len(keep)
                if len(keep) < len(chunk):
                    truncated[0] = True
            else:
                truncated[0] = True
    stream.close()


def _is_member(d: Path, pgid: int, marker: bytes) -> bool:
    """Whether the process at ``/proc/<pid>`` is live and in the group or marked."""
    try:
        # the command name may hold spaces and parentheses: fields follow the last ')'
        fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):
            return False  # exited: holds no file open, writes nothing
        if int(fields[2]) == pgid:
            return True
        return marker in (d / "environ").read_bytes().split(b"\0")
    except (OSError, IndexError, ValueError):
        return False  # gone, or another user's process


def _members(pgid: int, marker: bytes) -> list[int]:
    """Live processes of the group ``pgid`` or carrying ``marker`` in their environment."""
    if not (PROC / "self").is_dir():
        return []
    me = str(os.getpid())
    return sorted(
        int(d.name)
        for d in PROC.iterdir()
        if d.name.isdigit() and d.name != me and _is_member(d, pgid, marker)
    )


def _signal(pid: int, sig: signal.Signals, pgid: int, marker: bytes) -> None:
    """Signal ``pid`` only if it is still one of ours (a pid may have been reused since)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        # the pidfd pins the process: if it is a member now, the signal reaches that process
        if _is_member(PROC / str(pid), pgid, marker):
            signal.pidfd_send_signal(fd, sig)
    except OSError:
        pass
    finally:
        os.close(fd)


def end_all(pgid: int, marker: bytes, grace_s: float = KILL_GRACE_S) -> list[int]:
    """End every process of the group or with the marker: SIGTERM, then SIGKILL; wait.

    Returns the pids that were found running. Waits at most ``grace_s`` after SIGTERM and
    as long again after SIGKILL (a process in uninterruptible sleep can take that long).
    """
    seen: set[int] = set()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = _members(pgid, marker)
        seen.update(live)
        try:
            os.killpg(pgid, sig)  # also reaches a member forked since the scan
        except (ProcessLookupError, PermissionError):
            pass
        for pid in live:
            _signal(pid, sig, pgid, marker)
        deadline = time.monotonic() + grace_s
        while live and time.monotonic() < deadline:
            time.sleep(0.05)
            live = _members(pgid, marker)
            seen.update(live)
        if not live:
            break
    return sorted(seen)


def run_process(
    argv: list[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    timeout_s: float | None,
    stdout_path: str | os.PathLike[str],
    stderr_path: str | os.PathLike[str],
    output_cap: int = DEFAULT_OUTPUT_CAP,
    housekeeping: bool = True,
    grace_s: float = KILL_GRACE_S,
) -> ProcessResult:
    """Run ``argv`` in ``cwd`` with exactly ``env``; return only once all of it has ended.

    Raises InputError for an empty argv, a non-string argument or a program that cannot be
    started. Everything after the start is in the result: the exit status, a timeout,
    processes that had to be ended.
    """
    if not argv or not all(isinstance(a, str) and a for a in argv):
        raise InputError("a command must be a non-empty list of non-empty strings (argv)")
    if timeout_s is not None and not 0 < timeout_s <= 7 * 24 * 3600:
        raise InputError(f"timeout must be between 0 and 604800 s, got {timeout_s}")
    token = uuid.uuid4().hex
    marker = f"{MARKER_ENV}={token}".encode()
    run_env = {**env, MARKER_ENV: token}
    out_p, err_p = Path(stdout_path), Path(stderr_path)
    left = [clear_leftovers()] if housekeeping else []
    started, t0 = utcnow(), time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=run_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            shell=False,
        )
    except OSError as exc:
        raise InputError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    truncated = {"out": [False], "err": [False]}
    pumps = [
        threading.Thread(target=_pump, args=(s, p, output_cap, t), daemon=True)
        for s, p, t in (
            (proc.stdout, out_p, truncated["out"]),
            (proc.stderr, err_p, truncated["err"]),
        )
    ]
    for t in pumps:
        t.start()
    try:
        timed_out = not _wait_unreaped(proc.pid, timeout_s)
    except BaseException:
        # Ctrl-C: leave nothing of the command running behind us
        end_all(proc.pid, marker, grace_s)
        proc.wait()
        if housekeeping:
            clear_leftovers()
        raise
    # The leader is not reaped yet (a zombie when it exited), so its pid still names this
    # group and no other: the group is ended, and only then is the leader reaped.
    ended = end_all(proc.pid, marker, grace_s)
    proc.wait()
    strays = [] if timed_out else [p for p in ended if p != proc.pid]
    if housekeeping:
        # a process killed mid-way through a first C++ build leaves a lock later runs wait on,
        # and DeepSpeed never unlinks its shm buffers
        left.append(clear_leftovers())
    for t in pumps:
        t.join(10)
    return ProcessResult(
        argv=list(argv),
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - t0, 3),
        stdout_path=str(out_p),
        stderr_path=str(err_p),
        stdout_truncated=truncated["out"][0],
        stderr_truncated=truncated["err"][0],
        cwd=str(Path(cwd).resolve()),
        executable=_resolve(argv[0], cwd, env),
        env_sha256=hashlib.sha256(
            "\0".join(f"{k}={v}" for k, v in sorted(env.items())).encode()
        ).hexdigest(),
        host=socket.gethostname(),
        pid=proc.pid,
        started=started,
        strays=strays,
        removed_locks=[p for x in left for p in x.locks],
        housekeeping=[n for x in left for n in x.buffers],
    )


class Cancelled(KeyboardInterrupt):
    """A command ended by :func:`end_side_by_side` (Ctrl-C reached another thread)."""


_CANCEL = threading.Event()


def end_side_by_side(pool: Executor) -> None:
    """End the commands ``pool``'s threads are running, then wait for the threads. Ctrl-C
    reaches the main thread only; without this, commands launched side by side in worker
    threads would run to completion before the process could exit. Every command running in
    any thread meanwhile is ended too, as Ctrl-C would end it."""
    _CANCEL.set()
    try:
        pool.shutdown(wait=True, cancel_futures=True)
    finally:
        _CANCEL.clear()


def _wait_unreaped(pid: int, timeout_s: float | None) -> bool:
    """Wait for ``pid`` to exit without reaping it; False when ``timeout_s`` passed first.
    Raises Cancelled once :func:`end_side_by_side` asks."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    pause = 0.005
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if _CANCEL.is_set():
            raise Cancelled
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return True


def _resolve(prog: str, cwd: str | os.PathLike[str], env: Mapping[str, str]) -> str | None:
    if os.sep in prog:
        p = Path(cwd) / prog
        return str(p.resolve()) if p.exists() else None
    return shutil.which(prog, path=env.get("PATH"))

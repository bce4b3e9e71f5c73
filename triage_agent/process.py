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
- if the runner itself dies (SIGKILL of ``triage run``), a guard process beside it ends
  every command still running, group and marker alike (:mod:`.process_guard` says why
  neither a parent-death signal nor reaping at the next run would do);
- stdout and stderr go to files, each capped in size (the rest is drained, not kept);
- where the user has not set ``TORCH_EXTENSIONS_DIR``, importing this module sets it in this
  process's environment to this environment's own C++ extension build directory
  (:func:`triage_agent.extensions_dir.use_environment_default`), so every environment a caller
  builds from ``os.environ`` carries it and every launch finds the ops ``triage ops build``
  built. It says where builds are cached, never what a job computes;
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
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, Field

from .errors import InputError
from .extensions_dir import use_environment_default
from .jit_ops import clear_stale_locks, lock_notes
from .process_guard import KILL_GRACE_S, MARKER_ENV, PROC, end_all, marker_of, start_time
from .records import utcnow
from .shm_buffers import buffer_note, clear_dead_buffers

DEFAULT_OUTPUT_CAP = 4 << 20

# Before any caller builds a launch environment: torch's own default directory is shared by
# every environment of the user, each rebuilding the ops the other built (minutes a launch).
use_environment_default()


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


class _Guard:
    """This process's orphan guard (:mod:`.process_guard`), started at the first launch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None  # the process that owns the pipe (a fork has none)
        self._w: int | None = None
        self._proc: subprocess.Popen | None = None

    def _pipe(self) -> int | None:
        with self._lock:
            if self._pid == os.getpid():
                return self._w
            self._pid, self._w = os.getpid(), None
            if not (PROC / "self").is_dir():
                return None
            r, w = os.pipe()  # not inheritable: no launched command holds the write end
            root = str(Path(__file__).resolve().parents[1])
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    [root, *filter(None, [os.environ.get("PYTHONPATH")])]
                ),
            }
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-S", "-m", "triage_agent.process_guard", str(r)],
                    pass_fds=(r,),
                    env=env,
                    cwd="/",
                    stdin=subprocess.DEVNULL,
                    # no pipe of ours held open: a caller reading our output to its end
                    # would otherwise wait for the guard too
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    # a session of its own: a signal to the runner's group spares it
                    start_new_session=True,
                )
                self._w = w
            except OSError:
                os.close(w)  # no guard: launches still run, unguarded against our death
            finally:
                os.close(r)
            return self._w

    def forget(self) -> None:
        """In a child forked from this process (a worker pool, say): the pipe's write end
        was copied into it, and held there it would keep the guard from ever seeing our
        death. The child starts a guard of its own if it launches anything."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        if self._w is not None:
            try:
                os.close(self._w)
            except OSError:
                pass
        self._pid, self._w, self._proc = None, None, None

    @contextmanager
    def watching(self, token: str) -> Iterator[Callable[[int], None]]:
        """While the command ``token`` may have processes running: the guard ends them if
        this process dies first. Call what it yields with the leader's pid once started."""
        self.say("+", token)  # before the start: the marker names its processes already
        try:
            yield lambda pid: self.say("=", token, pid, start_time(pid) or "-")
        finally:
            self.say("-", token)

    def say(self, *words: object) -> None:
        """One line to the guard; a single write under PIPE_BUF, so threads never interleave."""
        w = self._pipe()
        if w is None:
            return
        try:
            os.write(w, (" ".join(map(str, words)) + "\n").encode())
        except OSError:
            pass  # the guard is gone: nothing more to do than run unguarded


_GUARD = _Guard()
os.register_at_fork(after_in_child=_GUARD.forget)


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
    marker = marker_of(token)
    run_env = {**env, MARKER_ENV: token}
    out_p, err_p = Path(stdout_path), Path(stderr_path)
    left = [clear_leftovers()] if housekeeping else []
    started, t0 = utcnow(), time.monotonic()
    with _GUARD.watching(token) as launched:
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
        launched(proc.pid)
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

"""Ending a command's processes: its group and every process carrying its marker, now
(:func:`end_all`) or once the runner that launched it has died (:func:`main`, the guard).

Every command runs in a session of its own, so that a timeout can end its whole group. That
also puts it out of reach of whatever kills the runner: SIGKILL of ``triage run`` leaves its
jobs running, still writing run directories that a resumed run is about to reuse. Neither
obvious remedy holds:

- ``PR_SET_PDEATHSIG`` signals only the direct child (a launcher's ranks are grandchildren,
  and a daemon has left the group), it fires when the *thread* that forked exits, and
  setting it needs a ``preexec_fn``, which is not safe in a process with threads;
- reaping stale groups at the next ``triage run`` comes too late: the jobs run, and
  write, until someone runs triage again.

So each runner process starts one guard beside it, in a session of its own, and holds the
only write end of a pipe to it. Before each launch the runner writes the command's marker,
after it the group and its leader's start time, and once everything of the command has
ended, that it has. The kernel closes the pipe however the runner dies; at end of file the
guard kills (SIGKILL at once: nobody is left to read the outputs, and a grace period would
overlap a resumed run) every process of each command still open, then exits. When the
runner exits normally nothing is open, and the guard just exits. A child the runner forks
closes its copy of the write end at once (``os.register_at_fork``): a worker that outlived
the runner would otherwise hold the pipe open and the guard would wait for it.

This module uses the standard library only: the guard starts beside every run, and what it
imports is time the runner's first launch shares the CPU with.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

PROC = Path("/proc")
KILL_GRACE_S = 3.0
MARKER_ENV = "TRIAGE_PROCESS_MARK"


def marker_of(token: str) -> bytes:
    """The environment entry every process of the command ``token`` carries."""
    return f"{MARKER_ENV}={token}".encode()


def _stat(d: Path) -> list[str]:
    # the command name may hold spaces and parentheses: fields follow the last ')'
    return (d / "stat").read_text().rsplit(")", 1)[1].split()


def start_time(pid: int) -> int | None:
    """Clock ticks after boot at which ``pid`` started (with the pid, it names a process)."""
    try:
        return int(_stat(PROC / str(pid))[19])
    except (OSError, IndexError, ValueError):
        return None


def _is_member(d: Path, pgid: int | None, marker: bytes) -> bool:
    """Whether the process at ``/proc/<pid>`` is live and in the group or marked."""
    try:
        fields = _stat(d)
        if fields[0] in ("Z", "X"):
            return False  # exited: holds no file open, writes nothing
        if pgid is not None and int(fields[2]) == pgid:
            return True
        return marker in (d / "environ").read_bytes().split(b"\0")
    except (OSError, IndexError, ValueError):
        return False  # gone, or another user's process


def _members(pgid: int | None, marker: bytes) -> list[int]:
    """Live processes of the group ``pgid`` or carrying ``marker`` in their environment."""
    if not (PROC / "self").is_dir():
        return []
    me = str(os.getpid())
    return sorted(
        int(d.name)
        for d in PROC.iterdir()
        if d.name.isdigit() and d.name != me and _is_member(d, pgid, marker)
    )


def _signal(pid: int, sig: signal.Signals, pgid: int | None, marker: bytes) -> None:
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


def end_all(
    pgid: int | None,
    marker: bytes,
    grace_s: float = KILL_GRACE_S,
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGKILL),
) -> list[int]:
    """End every process of the group (None: no group) or with the marker: each of
    ``signals`` in turn, waiting up to ``grace_s`` after each for them to be gone.

    Returns the pids that were found running.
    """
    seen: set[int] = set()
    for sig in signals:
        live = _members(pgid, marker)
        seen.update(live)
        if pgid is not None:
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


def _still_ours(pgid: int, started: int | None) -> bool:
    """Whether group ``pgid`` is still the command's. A pid stays taken while a group or
    session of that number exists, so if no process has the pid now, any process in group
    ``pgid`` is the command's (its leader died first); if one has it, it must be the leader
    that started then, or the number has been reused."""
    now = start_time(pgid)
    return now is None or now == started


def _end_orphans(open_: dict[str, tuple[int, int | None] | None]) -> None:
    for token, group in open_.items():
        pgid = group[0] if group and _still_ours(*group) else None
        end_all(pgid, marker_of(token), signals=(signal.SIGKILL,))


def main(fd: int) -> None:
    """Read the runner's launches from ``fd`` until it closes; end what is still open."""
    open_: dict[str, tuple[int, int | None] | None] = {}
    with os.fdopen(fd, "rb") as pipe:
        for raw in pipe:
            try:
                op, token, *rest = raw.decode().split()
            except ValueError:
                continue  # not one of the runner's lines: nothing to end by it
            if op == "+":  # about to launch: only the marker names its processes yet
                open_[token] = None
            elif op == "=" and token in open_:
                pgid, started = rest
                open_[token] = (int(pgid), None if started == "-" else int(started))
            elif op == "-":
                open_.pop(token, None)
    _end_orphans(open_)


if __name__ == "__main__":
    main(int(sys.argv[1]))

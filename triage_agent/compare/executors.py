"""Where per-rank comparisons run: local worker processes, or a Ray cluster.

Both pools have the same shape, so the comparison does not care which one it got: entered as
a context manager, ``slots`` says how many items run at once (what the work is split by),
and ``map(fn, items, on_result, label)`` runs ``fn`` on every item and hands each result to
``on_result`` in completion order. Leaving the context on an error or on Ctrl-C stops the
workers: pending items are cancelled and running ones are killed, never left behind.

Failures: an exception ``fn`` raises is raised here as it is (a bug keeps its traceback); a
worker that dies (killed, out of memory, a lost node) is a ``RankFailuresError`` naming the
ranks of the item (``label``). Expected per-rank problems are ``fn``'s to return as data.

Ray is optional (``pip install bitwise-triage[ray]``) and imported only when asked for. An
address is probed with a plain TCP connect first, and the connection is given
``CONNECT_TIMEOUT_S``: ``ray.init`` on an address where nothing, or something other than
Ray, listens retries for minutes instead of failing.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

from ..errors import InputError
from .errors import RankFailuresError, RayUnavailableError

RAY_INSTALL = "pip install bitwise-triage[ray]"
LOCAL = "local"
# A local cluster keeps only small results in its object store; Ray's default (30% of
# memory, in /dev/shm) would take memory the comparison itself needs.
LOCAL_OBJECT_STORE_BYTES = 256 << 20
PROBE_TIMEOUT_S = 5.0
# Waits for results wake up this often: Ctrl-C may be delivered to one of the pool's own
# threads, and the main thread only acts on it between two waits.
WAKE_S = 0.25
CONNECT_TIMEOUT_S = 60.0
CONNECT_HINT = (
    "check the address, that this Ray is the cluster's version, and its authentication: a "
    "cluster with token authentication needs RAY_AUTH_MODE=token and its token here"
)

OnResult = Callable[[Any], None]
Label = Callable[[Any], str]


def check_ray_address(address: str) -> str:
    """``local``, ``auto``, ``host:port`` or ``ray://host:port``; anything else is an error
    that says how to write it (``--ray runs/a`` took the run for an address)."""
    if address in (LOCAL, "auto"):
        return address
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not (sep and host and port.isdigit() and 0 < int(port) < 65536 and "/" not in host):
        raise InputError(
            f"--ray {address!r}: not a Ray address (host:port, ray://host:port, auto or "
            "local); write --ray=ADDRESS, or put a bare --ray after the runs"
        )
    return address


def import_ray() -> Any:
    # Ray's C++ core takes its log level when it loads: set before the import, or its
    # warnings from a connection no cluster answers still reach stderr after our error
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    try:
        import ray
    except ImportError:
        raise RayUnavailableError(f"--ray needs Ray, an optional extra: {RAY_INSTALL}") from None
    return ray


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _probe(address: str) -> None:
    if address == "auto":
        return  # Ray looks the address up itself and fails at once when there is none
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        why = exc.strerror or _first_line(exc)
        raise RayUnavailableError(f"cannot reach the Ray cluster at {address}: {why}") from None


def check_reachable(address: str) -> None:
    """Fail now, in one line, when ``--ray`` cannot work: Ray not installed, or nothing
    listening at the address. For callers that launch minutes of work before their first
    comparison; a cluster that listens but refuses is still found when the pool opens."""
    import_ray()
    if check_ray_address(address) != LOCAL:
        _probe(address)


def _ignore_sigint() -> None:
    # Ctrl-C reaches the whole process group; the parent stops the workers itself, so a
    # worker must not die mid-item with a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class ProcessPool:
    """``workers`` local processes (spawned: safe from threaded callers such as the MCP
    server). Traces are read from the paths as given, in this process's directory."""

    def __init__(self, workers: int):
        self.slots = workers
        self._ex: ProcessPoolExecutor | None = None

    def __enter__(self) -> ProcessPool:
        self._ex = ProcessPoolExecutor(
            max_workers=self.slots,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_ignore_sigint,
        )
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self._ex is not None
        if exc_type is None:
            self._ex.shutdown(wait=True)
            return
        stop = getattr(self._ex, "terminate_workers", None)  # Python 3.14
        if stop is not None:
            stop()
            return
        # before 3.14, running workers are only reachable through the executor's process
        # table, which shutdown() clears: take them first
        procs = list((getattr(self._ex, "_processes", None) or {}).values())
        self._ex.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(timeout=5)

    def map(self, fn: Callable, items: list, on_result: OnResult, label: Label) -> None:
        assert self._ex is not None
        # Workers are started by these submits. Started with SIGINT blocked, they keep it
        # blocked (the mask survives exec), so a Ctrl-C that arrives while a worker is
        # still importing cannot kill it with a traceback; here it is only held back until
        # the submits are done.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            futures = {self._ex.submit(fn, it): it for it in items}
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=WAKE_S, return_when=FIRST_COMPLETED)
            for f in done:
                try:
                    result = f.result()
                except BrokenProcessPool:
                    raise RankFailuresError(
                        f"a worker process died (killed, or out of memory) before "
                        f"{label(futures[f])} were compared"
                    ) from None
                on_result(result)


class RayPool:
    """Tasks on a Ray cluster: one at ``address``, or a local one started here and shut
    down afterwards (``address`` = ``local``). An already initialised Ray is used as it is.
    ``workers`` caps the tasks in flight (and the CPUs of a local cluster)."""

    def __init__(self, address: str, workers: int | None):
        self.address = check_ray_address(address)
        self.workers = workers
        self.slots = 1
        self._ray: Any = None
        self._started = False
        self._pending: list = []

    def __enter__(self) -> RayPool:
        ray = self._ray = import_ray()
        if not ray.is_initialized():
            self._connect(ray)
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.slots = min(cpus, self.workers) if self.workers else cpus
        return self

    def _connect(self, ray: Any) -> None:
        quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        # Ray's C++ core logs apart from Python's logging, from the thread a connection that
        # no cluster answers leaves hanging: under load its "failed to connect" warning came
        # after this process's one-line error. Quiet like the rest, unless the user chose.
        os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
        if self.address == LOCAL:
            kwargs = {
                "address": LOCAL,
                "num_cpus": self.workers,
                "include_dashboard": False,
                "object_store_memory": LOCAL_OBJECT_STORE_BYTES,
                **quiet,
            }
            what = "start a local Ray cluster"
        else:
            _probe(self.address)
            kwargs = {"address": self.address, **quiet}
            what = f"connect to the Ray cluster at {self.address}"
        box: dict[str, Any] = {}

        def init() -> None:
            try:
                ray.init(**kwargs)
            except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
                box["error"] = exc

        if self.address == LOCAL:
            init()
        else:
            # a daemon thread: when no cluster answers, ray.init is left hanging in it and
            # this process can still report and exit
            t = threading.Thread(target=init, name="ray-connect", daemon=True)
            t.start()
            t.join(CONNECT_TIMEOUT_S)
            if t.is_alive():
                raise RayUnavailableError(
                    f"cannot {what}: no Ray cluster answered within {CONNECT_TIMEOUT_S:.0f} s"
                )
        if "error" in box:
            hint = "" if self.address == LOCAL else f" ({CONNECT_HINT})"
            raise RayUnavailableError(f"cannot {what}: {_first_line(box['error'])}{hint}")
        self._started = True

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        ray = self._ray
        try:
            for ref in self._pending:  # an error or Ctrl-C: stop what is still running
                ray.cancel(ref, force=True)
        finally:
            self._pending = []
            if self._started:
                ray.shutdown()

    def map(self, fn: Callable, items: list, on_result: OnResult, label: Label) -> None:
        ray = self._ray
        task = ray.remote(num_cpus=1, max_retries=1)(fn)
        refs = {task.remote(it): it for it in items}
        self._pending = list(refs)
        while self._pending:
            done, self._pending = ray.wait(self._pending, num_returns=1, timeout=WAKE_S)
            for ref in done:
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError:
                    raise  # fn itself raised: a bug, raised with its own type and traceback
                except ray.exceptions.RayError as exc:  # a worker or node died, a lost object
                    raise RankFailuresError(
                        f"{label(refs[ref])}: the Ray task did not finish ({_first_line(exc)})"
                    ) from None
                on_result(result)


@contextmanager
def open_pool(workers: int, ray: str | None) -> Iterator[ProcessPool | RayPool]:
    """A Ray pool when ``ray`` is set (``local`` or an address), else ``workers`` processes."""
    pool: ProcessPool | RayPool = (
        RayPool(ray, workers if workers > 1 else None) if ray else ProcessPool(workers)
    )
    with pool:
        yield pool

"""Reading two large native runs at once: run A in a forked child, run B here.

Why: the scan of a native rank file is CPU-bound (a regular expression and a hash per line,
about 0.8 s per million events), and the two runs of a comparison are independent, so on a
machine with a free core the load takes the time of one run instead of two. The child
hands back the scanned run (hashes and line numbers; the file itself is mapped again here)
or the error it raised, which is then raised here unchanged.

Limits: POSIX ``fork`` only; used only when both runs are native, uncompressed, not read
``strict``, and large enough (``PARALLEL_MIN_BYTES``) for the fork to pay; otherwise the runs
are read one after the other. The child shares the parent's string hash seed (forked), which
the body hashes of both runs rely on.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from .model import TraceRun
from .reader import RANK_FILE_RE, read_native

PARALLEL_MIN_BYTES = 32 << 20


def _rank_files(path: Path) -> list[Path]:
    if path.is_dir():
        return [p for p in path.iterdir() if RANK_FILE_RE.match(p.name)]
    return [path]


def worth_forking(a: Path, b: Path) -> bool:
    """Both runs uncompressed native traces, together at least ``PARALLEL_MIN_BYTES``."""
    if not hasattr(os, "fork"):
        return False
    files = _rank_files(a) + _rank_files(b)
    if any(f.name.endswith(".gz") for f in files):
        return False
    try:
        return sum(f.stat().st_size for f in files) >= PARALLEL_MIN_BYTES
    except OSError:
        return False  # let the sequential reader name the problem


def _read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
    return b"".join(parts)


def read_native_pair(a: Path, b: Path) -> tuple[TraceRun, TraceRun]:
    """``read_native(a), read_native(b)``, with ``a`` read in a forked child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read A, send it (or its error) back, and leave at once
        status = 1
        try:
            os.close(r)
            try:
                payload = pickle.dumps(("ok", read_native(a)), protocol=5)
            except Exception as exc:  # handed to the parent, which raises it
                payload = pickle.dumps(("error", exc), protocol=5)
            with os.fdopen(w, "wb") as fh:
                fh.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(w)
    try:
        run_b = read_native(b)
        payload = _read_all(r)
    finally:
        os.close(r)
        _, code = os.waitpid(pid, 0)
    if not payload:
        # the child died without a word (killed, out of memory): read A here instead
        return read_native(a), run_b
    kind, value = pickle.loads(payload)
    if kind == "error":
        raise value
    return value, run_b

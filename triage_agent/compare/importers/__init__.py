"""Format detection and loading: every format lands in the same ``TraceRun`` model.

``load_run(path, fmt="auto")`` recognises, by file names and first records:
native (``trace_rank*.jsonl``), Megatron-Bridge determinism streams
(``stream_pp*_tp*_cp*_dp*.fp``), Megatron-LM rank-local traces (``rank_XXXXXX.jsonl``),
PyTorch DebugMode hash logs (text, ``aten::op(...)  ->  ...  # {'hash': ...}``) and Chrome
trace-event JSON with per-op ``io`` signatures (``.json`` or ``.json.gz``). A Chrome trace
holding two runs (two processes) is split with ``load_pair``.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from ..errors import FormatDetectionError
from ..model import TraceRun
from ..parallel import read_native_pair, worth_forking
from ..reader import RANK_FILE_RE, read_native
from . import bridge, chrome, debugmode, megatron_lm
from ._util import GZIP_ERRORS, JSON_ERRORS

FORMATS = ("native", "bridge", "megatron-lm", "debugmode", "chrome")
_JSON_ARRAY = re.compile(rb"\[\s*(\{|\]|$)")


def _head(path: Path, n: int = 4096) -> bytes:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read(n)
        with open(path, "rb") as fh:
            return fh.read(n)
    except GZIP_ERRORS as exc:
        raise FormatDetectionError(f"{path}: cannot read ({exc})") from None


def detect(path: Path) -> str:
    """The format of a file or directory, or a FormatDetectionError saying what was seen."""
    if not path.exists():
        raise FormatDetectionError(f"{path}: no such file or directory")
    if path.is_dir():
        names = [p.name for p in path.iterdir()]
        if any(RANK_FILE_RE.match(n) for n in names):
            return "native"
        if any(bridge.FILE_RE.match(n) for n in names):
            return "bridge"
        if any(megatron_lm.FILE_RE.match(n) for n in names):
            return "megatron-lm"
        raise FormatDetectionError(
            f"{path}: no trace files recognised (trace_rank*.jsonl, stream_pp*_tp*_cp*_dp*.fp,"
            " rank_XXXXXX.jsonl)"
        )
    name = path.name
    if RANK_FILE_RE.match(name):
        return "native"
    if bridge.FILE_RE.match(name):
        return "bridge"
    if megatron_lm.FILE_RE.match(name):
        return "megatron-lm"
    head = _head(path).lstrip()
    if head.startswith(b"{") or head.startswith(b"["):
        first = head.split(b"\n", 1)[0]
        try:
            rec = json.loads(first)
        except JSON_ERRORS:
            rec = None
        if isinstance(rec, dict) and rec.get("type") == "header":
            return "native"
        if isinstance(rec, dict) and "_header" in rec:
            return "bridge"
        # a bare array of trace events; a DebugMode log opens with "[nn.Mod] ..." instead
        if b"traceEvents" in head or _JSON_ARRAY.match(head):
            return "chrome"
    if debugmode.looks_like(head):
        return "debugmode"
    raise FormatDetectionError(
        f"{path}: format not recognised; name it with --input-format (native, bridge, megatron-lm, debugmode, chrome)"
    )


def load_run(path_or_dir: str | Path, fmt: str = "auto", strict: bool = False) -> TraceRun:
    """Load one run. ``fmt``: auto | native | bridge | megatron-lm | debugmode | chrome.

    ``strict`` (native only): decode and validate every line, not only the ones that differ.
    A Chrome trace holding two runs loads its first process here; use ``load_pair``."""
    path = Path(path_or_dir)
    kind = detect(path) if fmt == "auto" else fmt
    if kind not in FORMATS:
        raise FormatDetectionError(f"unknown format '{fmt}'; one of {', '.join(FORMATS)}")
    if not path.exists():
        raise FormatDetectionError(f"{path}: no such file or directory")
    if kind == "native":
        return read_native(path, strict=strict)
    if kind == "bridge":
        return bridge.load(path)
    if kind == "megatron-lm":
        return megatron_lm.load(path)
    if kind == "debugmode":
        return debugmode.load(path)
    runs = chrome.load(path)
    return runs[0]


def load_runs(
    a: str | Path, b: str | Path, fmt: str = "auto", strict: bool = False
) -> tuple[TraceRun, TraceRun]:
    """``load_run(a), load_run(b)``; two large native runs are read at the same time (run A
    in a forked process), which halves the load time where a second core is free."""
    pa, pb = Path(a), Path(b)
    if (
        not strict
        and pa.exists()
        and pb.exists()
        and (fmt == "native" or (fmt == "auto" and detect(pa) == detect(pb) == "native"))
        and worth_forking(pa, pb)
    ):
        return read_native_pair(pa, pb)
    return load_run(pa, fmt, strict), load_run(pb, fmt, strict)


def load_pair(path: str | Path, fmt: str = "auto") -> tuple[TraceRun, TraceRun]:
    """A single file that holds both runs (a Chrome trace with two run processes)."""
    p = Path(path)
    kind = detect(p) if fmt == "auto" else fmt
    if kind != "chrome":
        raise FormatDetectionError(
            f"{p}: a single {kind} trace holds one run; give run B as a second path"
        )
    runs = chrome.load(p)
    if len(runs) != 2:
        raise FormatDetectionError(
            f"{p}: holds {len(runs)} run(s); a single-file comparison needs exactly two"
        )
    return runs[0], runs[1]

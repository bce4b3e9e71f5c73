"""Bytes-level scan of a native rank file: one body hash and one line number per event.

Why: a million-event pair must load in about a second on two cores, and any per-line
Python bytecode (``for raw in fh``, a ``find``, a slice, three appends) costs about 1 us a
line. Here the per-line work runs in C: one regular expression over a 16 MiB block of the
mapped file returns, for every line, the bytes from ``"step"`` up to the last ``"dump"``
(the span the line-by-line reader hashes), ``map(hash, ...)`` hashes them, and numpy holds
the results. Byte offsets of lines are not kept: they are recomputed per block (numpy, a
few ms) only for the blocks holding an event the comparison decodes.

Exactness: the expression only accepts lines in the two layouts the line-by-line reader
hashes without decoding (``{"type": "event", "seq": N, "step"...`` and its compact form),
and for those it yields exactly the span ``raw[raw.find(b'"step"', 16, 64):raw.rfind(b'"dump"')]``
(a sequence number of at most 31 digits keeps ``"step"`` inside that window; the greedy
``.*`` finds the last ``"dump"``). Every other line -- step ends, the end record, unusual
layouts, empty or broken lines, the last line when it has no newline -- goes through
``odd_line``, which is the line-by-line reader's logic, in file order, so event indices,
error messages and their line numbers are the same.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .decode import EVENT_PREFIXES, decode_event_line, decode_event_obj
from .errors import MalformedTraceError
from .model import body_hash, parse_json_line

BLOCK = 1 << 24
# One match per line (re.M): group 1 is the hashed span of a canonical event line, empty
# for every other line.
_LINE = re.compile(
    rb'^(?:(?:\{"type": "event", "seq": \d{1,31}, |\{"type":"event","seq":\d{1,31},)'
    rb'("step".*)"dump".*|.*)$',
    re.M,
)


class LineIndex:
    """Byte offset of a line number, recomputed per block on demand (a few blocks cached)."""

    def __init__(self, buf: Any, blocks: list[tuple[int, int, int]]):
        self._buf = buf
        self._blocks = blocks  # (first line number, start offset, end offset)
        self._first = [b[0] for b in blocks]
        self._cache: dict[int, np.ndarray] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"_buf": None, "_blocks": self._blocks, "_first": self._first, "_cache": {}}

    def set_buffer(self, buf: Any) -> None:
        self._buf = buf

    def offset(self, line: int) -> int:
        k = bisect.bisect_right(self._first, line) - 1
        if k < 0:
            raise IndexError(line)
        starts = self._cache.get(k)
        if starts is None:
            first, lo, hi = self._blocks[k]
            arr = np.frombuffer(self._buf, dtype=np.uint8, count=hi - lo, offset=lo)
            starts = np.concatenate([[lo], np.flatnonzero(arr == 10) + (lo + 1)])
            del arr  # release the buffer export (a mapped file cannot close while held)
            if len(self._cache) >= 8:
                self._cache.pop(next(iter(self._cache)))
            self._cache[k] = starts
        return int(starts[line - self._blocks[k][0]])


class EventOffsets:
    """``offsets[i]``: the byte offset of event ``i``'s line."""

    def __init__(self, lines: np.ndarray, index: LineIndex):
        self._lines = lines
        self.index = index

    def __getitem__(self, i: int) -> int:
        return self.index.offset(int(self._lines[i]))

    def __len__(self) -> int:
        return len(self._lines)


@dataclass
class RankScan:
    """What the scan of one rank file found; picklable (no buffer), so a forked reader can
    hand it back."""

    hashes: np.ndarray
    lines: np.ndarray
    blocks: list[tuple[int, int, int]]
    truncated_at: int | None = None
    clean_end: bool = False
    warnings: list[str] = field(default_factory=list)


def odd_line(raw: bytes, ln: int, path: Path, index: int) -> tuple[int | None, str]:
    """The line-by-line reader's handling of one line (``raw`` with its newline, if any).

    Returns (body hash, "event") for an event, (None, record type) otherwise; raises
    MalformedTraceError for what may not stand in a trace."""
    if raw.startswith(EVENT_PREFIXES):
        i = raw.find(b'"step"', 16, 64)
        j = raw.rfind(b'"dump"')
        if 0 < i < j:
            return hash(raw[i:j]), "event"
        # unusual layout: decode now; the decoded body's hash stands in
        return body_hash(decode_event_line(raw, index, ln, path)), "event"
    if not raw.strip():
        raise MalformedTraceError(f"{path}:{ln}: empty line inside a trace")
    obj = parse_json_line(raw, path, ln)
    kind = obj.get("type", "event") if isinstance(obj, dict) else None
    if kind == "event":  # an event in a layout the fast path does not know
        return body_hash(decode_event_obj(obj, index, ln, path)), "event"
    if kind == "header":
        raise MalformedTraceError(f"{path}:{ln}: a second header inside one rank file")
    if kind not in ("end", "step_end"):
        raise MalformedTraceError(f"{path}:{ln}: expected an event, step_end or end record")
    return None, kind


def _blocks(read: Any, start: int, size: int):
    """(offset, bytes) blocks of whole lines from ``start``; a last line without newline
    comes alone as the final block, flagged by the missing newline."""
    pos = start
    while pos < size:
        data = read(pos, min(BLOCK, size - pos))
        k = data.rfind(b"\n")
        while k < 0 and pos + len(data) < size:  # a line longer than a block
            data += read(pos + len(data), min(BLOCK, size - pos - len(data)))
            k = data.rfind(b"\n")
        if k < 0:
            yield pos, data
            return
        if k + 1 < len(data):
            data = data[: k + 1]
        yield pos, data
        pos += len(data)


def scan_events(path: Path, read: Any, size: int, start: int) -> RankScan:
    """Hash every event line after the header (which ends at ``start``).

    ``read(offset, n)`` returns up to ``n`` bytes of the file (``os.pread`` on the open file,
    so that the scan does not keep the file mapped: memory stays at about two blocks)."""
    import json

    hashes: list[np.ndarray] = []
    lines: list[np.ndarray] = []
    blocks: list[tuple[int, int, int]] = []
    scan = RankScan(np.zeros(0, np.int64), np.zeros(0, np.int64), blocks)
    count = 0  # events so far
    ln = 2  # line number of the block's first line
    for pos, data in _blocks(read, start, size):
        if data[-1:] != b"\n":  # the last line, without its newline: torn if it does not parse
            try:
                json.loads(data)
            except (ValueError, RecursionError):
                scan.truncated_at = ln
                scan.warnings.append(
                    f"{path}:{ln}: torn last line (the rank stopped mid-write); "
                    "compared up to the line before it"
                )
                break
            blocks.append((ln, pos, pos + len(data)))
            value, kind = odd_line(data, ln, path, count)
            if value is not None:
                hashes.append(np.asarray([value], dtype=np.int64))
                lines.append(np.asarray([ln], dtype=np.int64))
            elif kind == "end":
                scan.clean_end = True
            break
        blocks.append((ln, pos, pos + len(data)))
        spans = _LINE.findall(data, 0, len(data) - 1)
        m = len(spans)
        if b"" not in spans:
            hashes.append(np.fromiter(map(hash, spans), np.int64, m))
            lines.append(np.arange(ln, ln + m, dtype=np.int64))
            count += m
        else:
            index = LineIndex(data, [(ln, 0, len(data))])
            h: list[int] = []
            lns: list[int] = []
            k = 0
            while k < m:
                try:
                    odd = spans.index(b"", k)
                except ValueError:
                    odd = m
                h += map(hash, spans[k:odd])
                lns += range(ln + k, ln + odd)
                if odd < m:
                    off = index.offset(ln + odd)
                    raw = data[off : data.find(b"\n", off) + 1]
                    value, kind = odd_line(raw, ln + odd, path, count + len(h))
                    if value is not None:
                        h.append(value)
                        lns.append(ln + odd)
                    elif kind == "end":
                        scan.clean_end = True
                k = odd + 1
            hashes.append(np.asarray(h, dtype=np.int64))
            lines.append(np.asarray(lns, dtype=np.int64))
            count += len(h)
        ln += m
    if hashes:
        scan.hashes = np.concatenate(hashes)
        scan.lines = np.concatenate(lines)
    return scan

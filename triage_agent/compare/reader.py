"""Fast reading of native traces (``trace_rank{R:05d}.jsonl``, optionally ``.gz``).

Why this shape: on a 2-core machine ``json.loads`` of one event line costs ~15 us, so a
million-event pair cannot be parsed in a few seconds. The fast path therefore does per line
only what C does quickly: check the line's framing (``{"type": "event", ...``), and hash the
bytes from ``"step"`` up to ``"dump"`` -- step, kind, name, scope, call, phase, caller,
inputs and outputs, exactly the fields that decide alignment and equality. Two events with
equal hashes are equal; events that differ are decoded on demand and validated against
``trace_format.TraceEvent``.

Validation, and its limit: the header, every non-event line, and every event the comparison
decodes are validated exactly (a fast checker accepts only what the pydantic model accepts;
anything it doubts goes through the model itself, whose message is reported with file and
line). An event line whose bytes are identical in both runs is not decoded in the fast path,
so a schema violation inside such a line is only caught with ``strict=True``, which decodes
and validates every line (about 15-60 us per line).

A torn last line (a rank that crashed mid-write) is dropped with a warning and the comparison
runs up to it; a torn line anywhere else is malformed input.
"""

from __future__ import annotations

import gzip
import io
import json
import mmap
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..trace_format import TRACE_SCHEMA_VERSION, TraceHeader
from .decode import EVENT_PREFIXES, decode_event_line, decode_event_obj
from .errors import MalformedTraceError, SchemaVersionError
from .model import (
    Ev,
    MemoryRankStream,
    RankStream,
    TraceRun,
    parse_json_line,
    validation_message,
)
from .scan import EventOffsets, LineIndex, RankScan, scan_events

RANK_FILE_RE = re.compile(r"^trace_rank(\d+)\.jsonl(\.gz)?$")


class FileRankStream(RankStream):
    """A native trace file, hashed line by line; events are decoded on demand."""

    def __init__(
        self,
        rank: int,
        source: Path,
        header: dict[str, Any],
        hashes: Any,
        offsets: Any,
        lines: Any,
        truncated_at: int | None,
        clean_end: bool,
        buf: Any,
    ):
        self.rank = rank
        self.source = source
        self.header = header
        self._buf = buf
        self._hashes = hashes
        self._offsets = offsets
        self._lines = lines
        self.truncated_at = truncated_at
        self.clean_end = clean_end

    def __len__(self) -> int:
        return len(self._hashes)

    def hashes(self) -> Any:
        """Body hashes in event order (a list, or an int64 array from the fast scan)."""
        return self._hashes

    def __getstate__(self) -> dict[str, Any]:
        # a mapped file does not pickle: it is mapped again on the other side
        state = dict(self.__dict__)
        if isinstance(self._buf, mmap.mmap):
            state["_buf"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._buf is None:
            with open(self.source, "rb") as fh:
                self._buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            index = getattr(self._offsets, "index", None)
            if index is not None:
                index.set_buffer(self._buf)

    def raw_line(self, i: int) -> bytes:
        off = self._offsets[i]
        end = self._buf.find(b"\n", off)
        return self._buf[off : end if end >= 0 else len(self._buf)]

    def event(self, i: int) -> Ev:
        return decode_event_line(self.raw_line(i), i, int(self._lines[i]), self.source)

    def may_contain(self, text: str, lo: int, hi: int) -> Iterator[int]:
        """The events in ``[lo, hi)`` whose line holds ``text`` byte for byte, last first,
        found by searching the file's bytes instead of decoding every line (what makes a
        producer search over thousands of events cheap). A JSON escape anywhere in the
        range could spell ``text`` differently, so then every index is a candidate."""
        if hi <= lo:
            return
        start, pos = self._offsets[lo], self._offsets[hi] if hi < len(self) else len(self._buf)
        if self._buf.find(b"\\", start, pos) >= 0:
            yield from range(hi - 1, lo - 1, -1)
            return
        needle = text.encode()
        while (k := self._buf.rfind(needle, start, pos)) >= 0:
            i = self._event_at(k, lo, hi)
            yield i
            hi, pos = i, self._offsets[i]

    def _event_at(self, offset: int, lo: int, hi: int) -> int:
        """The last event in ``[lo, hi)`` whose line starts at or before ``offset``."""
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._offsets[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo


def _open_lines(path: Path) -> tuple[Any, bytes | mmap.mmap]:
    """A line iterator over the (decompressed) file, and a buffer for random access."""
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(path.read_bytes())
        except (OSError, EOFError, zlib.error) as exc:
            raise MalformedTraceError(f"{path}: not a readable gzip file ({exc})") from None
        return io.BytesIO(data), data
    fh = open(path, "rb")  # noqa: SIM115 - closed by the caller
    if path.stat().st_size == 0:
        return fh, b""
    return fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def _block_reader(it: Any, buf: bytes | mmap.mmap) -> Any:
    """``read(offset, n)``: positional reads of the open file (not through the mapping, whose
    touched pages would all count as resident), or slices of decompressed data."""
    if isinstance(buf, mmap.mmap):
        fd = it.fileno()
        return lambda off, n: os.pread(fd, n, off)
    return lambda off, n: buf[off : off + n]


def read_header(raw: bytes, source: Path) -> dict[str, Any]:
    obj = parse_json_line(raw, source, 1)
    if not isinstance(obj, dict) or obj.get("type") != "header":
        raise MalformedTraceError(f"{source}:1: the first line must be a trace header")
    version = obj.get("schema_version", TRACE_SCHEMA_VERSION)
    if version != TRACE_SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{source}:1: trace schema version {version!r}, this reader understands "
            f"{TRACE_SCHEMA_VERSION}; re-capture or upgrade bitwise-triage"
        )
    try:
        return TraceHeader.model_validate(obj).model_dump()
    except ValidationError as exc:
        raise MalformedTraceError(
            f"{source}:1: invalid trace header at {validation_message(exc)}"
        ) from None


def read_rank_file(path: Path, strict: bool = False) -> tuple[RankStream, list[str]]:
    """Read one native rank file. Returns the stream and warnings (torn tail, no end record)."""
    it, buf = _open_lines(path)
    try:
        return _read_lines(path, it, buf, strict)
    finally:
        it.close()


def _read_lines(path: Path, it: Any, buf: bytes | mmap.mmap, strict: bool):
    warnings: list[str] = []
    first = it.readline()
    if not first.strip():
        raise MalformedTraceError(f"{path}:1: empty trace file (no header)")
    header = read_header(first, path)
    if not strict:
        scan = scan_events(path, _block_reader(it, buf), len(buf), len(first))
        return _stream_from_scan(path, header, scan, buf)
    # strict: decode and validate every line, in file order
    truncated_at: int | None = None
    clean_end = False
    decoded: list[Ev] = []
    ln = 1
    for raw in it:
        ln += 1
        if raw[-1:] != b"\n":  # the last line, without its newline: torn if it does not parse
            try:
                json.loads(raw)
            except (ValueError, RecursionError):
                truncated_at = ln
                warnings.append(
                    f"{path}:{ln}: torn last line (the rank stopped mid-write); "
                    "compared up to the line before it"
                )
                break
        if raw.startswith(EVENT_PREFIXES):
            decoded.append(decode_event_line(raw, len(decoded), ln, path))
        elif not raw.strip():
            raise MalformedTraceError(f"{path}:{ln}: empty line inside a trace")
        else:
            obj = parse_json_line(raw, path, ln)
            kind = obj.get("type", "event") if isinstance(obj, dict) else None
            if kind == "event":  # an event in a layout the fast path does not know
                decoded.append(decode_event_obj(obj, len(decoded), ln, path))
            elif kind == "end":
                clean_end = True
            elif kind == "header":
                raise MalformedTraceError(f"{path}:{ln}: a second header inside one rank file")
            elif kind != "step_end":
                raise MalformedTraceError(f"{path}:{ln}: expected an event, step_end or end record")
    rank = header["rank"]
    if truncated_at is None and not clean_end:
        warnings.append(f"{path}: no end record (rank {rank} did not finish cleanly)")
    stream = MemoryRankStream(rank, path, decoded, header, truncated_at, clean_end)
    return stream, warnings


def _stream_from_scan(
    path: Path, header: dict[str, Any], scan: RankScan, buf: Any
) -> tuple[RankStream, list[str]]:
    warnings = list(scan.warnings)
    if scan.truncated_at is None and not scan.clean_end:
        warnings.append(f"{path}: no end record (rank {header['rank']} did not finish cleanly)")
    offsets = EventOffsets(scan.lines, LineIndex(buf, scan.blocks))
    stream = FileRankStream(
        header["rank"],
        path,
        header,
        scan.hashes,
        offsets,
        scan.lines,
        scan.truncated_at,
        scan.clean_end,
        buf,
    )
    return stream, warnings


def native_files(path: Path) -> list[Path]:
    """The rank files of a native trace directory in name order (or the single file)."""
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.iterdir() if RANK_FILE_RE.match(p.name))
    if not files:
        raise MalformedTraceError(f"{path}: no trace_rank*.jsonl files")
    return files


def file_rank(f: Path) -> int | None:
    """The rank a file's name gives (``trace_rank00003.jsonl``), None for any other name."""
    m = RANK_FILE_RE.match(f.name)
    return int(m.group(1)) if m else None


def check_file_rank(f: Path, header_rank: int) -> None:
    named = file_rank(f)
    if named is not None and named != header_rank:
        raise MalformedTraceError(
            f"{f}:1: header says rank {header_rank} but the file name says {named}"
        )


def add_rank(ranks: dict[int, Any], rank: int, value: Any, f: Path, path: Path) -> None:
    if rank in ranks:
        raise MalformedTraceError(f"{f}:1: rank {rank} appears twice in {path}")
    ranks[rank] = value


def run_identity(path: Path, headers: list[dict[str, Any]]) -> tuple[str, int, list[str]]:
    """Run id, world size and warnings of a run from its rank files' headers (file order):
    rank files that disagree on world size are mixed runs; different run ids, a warning."""
    run_ids = {h["run_id"] for h in headers}
    world_sizes = {h["world_size"] for h in headers}
    if len(world_sizes) > 1:
        raise MalformedTraceError(
            f"{path}: rank files disagree on world_size ({sorted(world_sizes)}); mixed runs?"
        )
    warnings = []
    if len(run_ids) > 1:
        warnings.append(f"{path}: rank files carry different run ids {sorted(run_ids)}")
    return sorted(run_ids)[0], world_sizes.pop(), warnings


def read_native(path: Path, strict: bool = False) -> TraceRun:
    """Read a native trace directory (or a single rank file)."""
    ranks: dict[int, RankStream] = {}
    warnings: list[str] = []
    for f in native_files(path):
        stream, warns = read_rank_file(f, strict=strict)
        warnings += warns
        check_file_rank(f, stream.rank)
        add_rank(ranks, stream.rank, stream, f, path)
    run_id, world, more = run_identity(path, [s.header for s in ranks.values()])
    return TraceRun(
        path=path,
        fmt="native",
        run_id=run_id,
        world_size=world,
        ranks=ranks,
        warnings=warnings + more,
    )

"""In-memory trace runs: what the readers and importers produce and the aligner consumes.

Why not pydantic here: a run holds up to millions of events, and the comparison of two
same-framework runs must not materialise them. A native rank keeps, per event, only a
64-bit hash of its comparison-relevant bytes and the byte offset of its line; the event
itself is decoded (and validated against ``trace_format.TraceEvent``) only where the two
runs disagree. Foreign formats are small by comparison and are held decoded in memory.

Limits: two events are treated as equal when their body hashes are equal; Python's bytes
hash is 64 bits, the same width as the tensor digests themselves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from ..trace_format import TraceEvent
from .errors import MalformedTraceError


class Ev(NamedTuple):
    """One decoded event, format-independent. ``inputs``/``outputs`` hold canonical digest
    signatures (strings; None where the argument was not a tensor)."""

    index: int
    seq: int
    step: int
    kind: str
    name: str
    scope: str
    call: int
    phase: str
    caller: str | None
    inputs: tuple[str | None, ...]
    outputs: tuple[str | None, ...]
    dump: str | None
    meta: dict[str, Any]
    line: int
    inputs_after: tuple[str | None, ...] | None = None
    # (inputs, outputs): the bytes' signature where a record is marked uninitialised
    values: tuple[tuple[str | None, ...], tuple[str | None, ...]] | None = None


def digest_sig(d: dict[str, Any] | None) -> str | None:
    """Canonical signature of one tensor digest: dtype, shape, digest and order digest.

    dtype and shape are part of it: a bf16 and an fp32 tensor are different tensors even if
    a digest collided."""
    if d is None:
        return None
    order = d.get("order")
    shape = "x".join(str(s) for s in d.get("shape", ()))
    base = f"{d.get('dtype', '?')}[{shape}]:{d.get('digest')}"
    return f"{base}/{order}" if order else base


def value_sigs(ins: list, outs: list) -> tuple | None:
    """What ``Ev.values`` holds: for each record marked uninitialised that kept the digest of
    its bytes, the signature those bytes have (None elsewhere); None when there is none."""
    vi = tuple(_value_sig(d) for d in ins)
    vo = tuple(_value_sig(d) for d in outs)
    return (vi, vo) if any(vi) or any(vo) else None


def _value_sig(d: dict[str, Any] | None) -> str | None:
    if not d or d.get("digest") != "uninitialized" or not d.get("value"):
        return None
    return digest_sig({**d, "digest": d["value"], "order": d.get("value_order")})


def ev_from_model(ev: TraceEvent, index: int, line: int) -> Ev:
    after = ev.meta.get("inputs_after")
    return Ev(
        index=index,
        seq=ev.seq,
        step=ev.step,
        kind=ev.kind,
        name=ev.name,
        scope=ev.scope,
        call=ev.call,
        phase=ev.phase,
        caller=ev.caller,
        inputs=tuple(digest_sig(d.model_dump()) if d else None for d in ev.inputs),
        outputs=tuple(digest_sig(d.model_dump()) if d else None for d in ev.outputs),
        dump=ev.dump,
        meta=ev.meta,
        line=line,
        inputs_after=tuple(digest_sig(d) for d in after) if isinstance(after, list) else None,
        values=value_sigs(
            [d.model_dump() if d else None for d in ev.inputs],
            [d.model_dump() if d else None for d in ev.outputs],
        ),
    )


def body_hash(ev: Ev) -> int:
    """Hash of what decides equality and alignment for decoded events."""
    return hash((ev.step, ev.kind, ev.name, ev.scope, ev.call, ev.phase, ev.inputs, ev.outputs))


class RankStream:
    """The events of one rank of one run, in execution order."""

    rank: int
    source: Path
    header: dict[str, Any]
    truncated_at: int | None  # file line number of a torn last line, when there was one
    clean_end: bool

    def __len__(self) -> int:
        raise NotImplementedError

    def hashes(self) -> list[int]:
        raise NotImplementedError

    def event(self, i: int) -> Ev:
        raise NotImplementedError

    def events(self, lo: int, hi: int) -> list[Ev]:
        return [self.event(i) for i in range(lo, hi)]

    def may_contain(self, text: str, lo: int, hi: int) -> Iterator[int]:
        """Indices in ``[lo, hi)``, last first, of the events whose record may hold ``text``:
        a superset, which the caller checks on the decoded events. Here: every index."""
        return iter(range(hi - 1, lo - 1, -1))


class MemoryRankStream(RankStream):
    """Decoded events held in memory (importers, strict reading, tests)."""

    def __init__(
        self,
        rank: int,
        source: Path,
        events: list[Ev],
        header: dict[str, Any] | None = None,
        truncated_at: int | None = None,
        clean_end: bool = True,
    ):
        self.rank = rank
        self.source = source
        self._events = events
        self.header = header or {}
        self.truncated_at = truncated_at
        self.clean_end = clean_end
        self._hashes: list[int] | None = None

    def __len__(self) -> int:
        return len(self._events)

    def hashes(self) -> list[int]:
        if self._hashes is None:
            self._hashes = [body_hash(e) for e in self._events]
        return self._hashes

    def event(self, i: int) -> Ev:
        return self._events[i]


@dataclass
class TraceRun:
    """One run: its ranks, where it came from, and what the reader had to say about it."""

    path: Path
    fmt: str
    run_id: str
    world_size: int | None
    ranks: dict[int, RankStream]
    warnings: list[str] = field(default_factory=list)
    records_inputs: bool = True  # False: the format has no input digests (origin undecidable)
    label: str = ""


def parse_json_line(raw: bytes, source: Path, line: int) -> Any:
    try:
        obj = json.loads(raw.decode("utf-8"))  # strict: json.loads(bytes) passes surrogates
        if b"\\ud" in raw or b"\\uD" in raw:  # an escaped lone surrogate is not text either
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        return obj
    except (ValueError, RecursionError) as exc:  # also not UTF-8, a huge int, too deep
        raise MalformedTraceError(f"{source}:{line}: not valid JSON ({exc})") from None


def validation_message(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "record"
    return f"'{loc}': {first['msg']}"

"""The per-rank trace writer: one JSONL file per rank, written by that rank alone.

Events are held with their digests still on the device; at each step boundary the sink
reads every pending digest back at once (:func:`digest.readback`), writes the events and a
``step_end`` line, and flushes, so a rank that crashes later keeps every completed step.
``close`` writes the ``end`` line and a small status file (``capture_rank{R:05d}.json``)
saying which steps the process saw at all: a window that never occurred is reported from
it, not guessed.

If a trace file for this rank already exists (a resumed run whose earlier process also
traced), the later process writes into ``part{K}/`` under the out dir instead of
overwriting it; :func:`capture.capture_command` reports the parts.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..trace_format import StepEnd, TensorDigest, TraceEnd, TraceEvent, TraceHeader, trace_filename
from .digest import Staged, readback


def status_filename(rank: int) -> str:
    return f"capture_rank{rank:05d}.json"


class CaptureStatus(BaseModel):
    """What one process saw; written at exit next to its trace."""

    rank: int
    pid: int
    trace: str | None = Field(default=None, description="trace file, relative to the out dir")
    steps_seen: list[int] = Field(default_factory=list)
    steps_traced: list[int] = Field(default_factory=list)
    events: int = 0
    status: str = "ok"
    note: str = ""
    resumed_from: int | None = Field(
        default=None,
        description="the step the process declared it resumed from (MetricLog's resumed_from): "
        "its first step is that one's successor, a global step, even when an earlier process "
        "of the run went further",
    )


# The trace line of an event as ``TraceEvent.model_dump_json(exclude_none=True)`` writes it:
# same keys, same order, same separators. Built from plain values at the step boundary, so
# a traced step pays no model validation per event; the reader still validates every line.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass(slots=True)
class PendingEvent:
    seq: int
    step: int
    kind: str
    name: str
    scope: str
    call: int
    phase: str
    caller: str | None
    inputs: list[Staged | None]
    outputs: list[Staged | None] = field(default_factory=list)
    dump: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def staged(self) -> list[Staged | None]:
        return [*self.inputs, *self.outputs]

    def to_json(self, rec_of: dict[int, dict | None] | None = None) -> str:
        """The event's trace line (no newline); see ``_encode``.

        ``rec_of`` memoises digest records by ``id(Staged)`` for one step (a digest reused by
        many events is formatted once). A ``meta`` value JSON cannot hold falls back to the
        validated model, which raises on it as it always did.
        """
        memo = {} if rec_of is None else rec_of

        def rec(s: Staged | None) -> dict | None:
            if s is None:
                return None
            r = memo.get(id(s))
            if r is None:
                r = memo[id(s)] = s.record()
            return r

        d: dict[str, Any] = {
            "type": "event",
            "seq": self.seq,
            "step": self.step,
            "kind": self.kind,
            "name": self.name,
            "scope": self.scope,
            "call": self.call,
            "phase": self.phase,
        }
        if self.caller is not None:
            d["caller"] = self.caller
        d["inputs"] = [rec(s) for s in self.inputs]
        d["outputs"] = [rec(s) for s in self.outputs]
        if self.dump is not None:
            d["dump"] = self.dump
        d["meta"] = self.meta
        try:
            return _encode(d)
        except (TypeError, ValueError):
            return self.to_record().model_dump_json(exclude_none=True)

    def to_record(self) -> TraceEvent:
        def rec(s: Staged | None) -> TensorDigest | None:
            return None if s is None else TensorDigest.model_validate(s.record())

        return TraceEvent(
            seq=self.seq,
            step=self.step,
            kind=self.kind,  # type: ignore[arg-type]
            name=self.name,
            scope=self.scope,
            call=self.call,
            phase=self.phase,  # type: ignore[arg-type]
            caller=self.caller,
            inputs=[rec(s) for s in self.inputs],
            outputs=[rec(s) for s in self.outputs],
            dump=self.dump,
            meta=self.meta,
        )


class TraceSink:
    """Owns one rank's trace file. Opened lazily, at the first traced step."""

    def __init__(self, out_dir: Path, rank: int, header: TraceHeader):
        self.out_dir = Path(out_dir)
        self.rank = rank
        self.header = header
        self.path: Path | None = None
        self._fh = None
        self.events_written = 0
        self.steps_written: list[int] = []

    def _open(self) -> None:
        name = trace_filename(self.rank)
        path = self.out_dir / name
        k = 1
        while path.exists():
            path = self.out_dir / f"part{k}" / name
            k += 1
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(path, "x", encoding="utf-8")
        self.path = path
        self._line(self.header)

    def _line(self, rec: BaseModel) -> None:
        assert self._fh is not None
        self._fh.write(rec.model_dump_json(exclude_none=True) + "\n")

    def write_step(self, step: int, events: list[PendingEvent]) -> None:
        """Resolve the step's digests (one readback) and write them, then flush."""
        if self._fh is None:
            self._open()
        readback(s for ev in events for s in ev.staged())
        memo: dict[int, dict | None] = {}
        write = self._fh.write
        for ev in events:
            write(ev.to_json(memo) + "\n")
        self._line(StepEnd(step=step, events=len(events)))
        self._fh.flush()
        self.events_written += len(events)
        self.steps_written.append(step)

    def close(
        self, status: str, steps_seen: list[int], note: str = "", resumed_from: int | None = None
    ) -> None:
        if self._fh is not None:
            ok = "ok" if status == "ok" else "error"
            self._line(TraceEnd(status=ok, steps=self.steps_written, note=note))
            self._fh.close()
            self._fh = None
        st = CaptureStatus(
            rank=self.rank,
            pid=os.getpid(),
            trace=str(self.path.relative_to(self.out_dir)) if self.path else None,
            steps_seen=steps_seen,
            steps_traced=self.steps_written,
            events=self.events_written,
            status=status,
            note=note,
            resumed_from=resumed_from,
        )
        target = self.out_dir / status_filename(self.rank)
        if self.path is not None and self.path.parent != self.out_dir:
            target = self.path.parent / status_filename(self.rank)
        elif target.exists() and self.path is None:
            # an earlier process of this rank already reported; keep both
            prev = json.loads(target.read_text())
            prev_seen = prev.get("steps_seen", [])
            st.steps_seen = sorted(set(prev_seen) | set(steps_seen))
            st.trace = prev.get("trace")
            st.steps_traced = prev.get("steps_traced", [])
            st.events = prev.get("events", 0)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(st.model_dump_json(indent=1))
        os.replace(tmp, target)

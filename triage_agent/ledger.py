"""The evidence ledger: an append-only JSONL event log; current state is a fold over it.

Durability rules:
- every append takes an exclusive ``flock`` on the log, writes one whole line with a single
  ``write`` on an O_APPEND descriptor, flushes and fsyncs, so concurrent writers from several
  processes never interleave or lose a record;
- a torn last line (a crash mid-write) is reported with its byte offset and ignored by
  readers; the next writer moves those bytes to ``ledger.jsonl.torn-<offset>`` before it
  appends, so they are kept for inspection and never glued to a new record;
- a corrupted line anywhere else is a LedgerError naming the line: never a silent skip.
Nothing is rewritten in place.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InputError, LedgerError
from .records import (
    Artifact,
    Case,
    Evidence,
    Finding,
    Hypothesis,
    HypothesisStatus,
    Verdict,
    new_id,
    utcnow,
)

SCHEMA_VERSION = 1
EventKind = Literal["case", "finding", "hypothesis", "evidence", "verdict", "note", "stage"]


class LedgerEvent(BaseModel):
    # a stored line must carry every field and nothing else: a garbled key is corruption,
    # not a default quietly filled in
    model_config = ConfigDict(extra="forbid")

    v: int = Field(ge=1, le=SCHEMA_VERSION)
    id: str = Field(min_length=1)
    ts: str = Field(min_length=1)
    kind: EventKind
    data: dict[str, Any]

    @classmethod
    def new(cls, kind: EventKind, data: dict[str, Any]) -> LedgerEvent:
        return cls(v=SCHEMA_VERSION, id=new_id("ev"), ts=utcnow(), kind=kind, data=data)


class TornTail(BaseModel):
    offset: int
    length: int


class LedgerState(BaseModel):
    """The fold of every event: the latest version of each record, evidence in order."""

    case: Case | None = None
    findings: dict[str, Finding] = Field(default_factory=dict)
    hypotheses: dict[str, Hypothesis] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)
    verdict: Verdict | None = None
    verdicts: list[Verdict] = Field(default_factory=list)
    notes: list[dict[str, Any]] = Field(default_factory=list)
    stages: list[dict[str, Any]] = Field(default_factory=list)
    events: int = 0
    torn_tail: TornTail | None = None

    def evidence_for(self, hypothesis_id: str) -> list[Evidence]:
        return [e for e in self.evidence if hypothesis_id in e.hypotheses]

    def stages_done(self) -> set[str]:
        return {s["stage"] for s in self.stages if s.get("status") == "done"}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Ledger:
    """An evidence ledger rooted in a workspace directory (``.triage/`` by default)."""

    FILENAME = "ledger.jsonl"

    def __init__(self, workspace: str | os.PathLike[str]):
        self.workspace = Path(workspace)
        self.path = self.workspace / self.FILENAME

    # -- writing ---------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[int]:
        self.workspace.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _quarantine_torn_tail(self, fd: int) -> bytes:
        """Deal with an unterminated last line before appending; returns the note line to add.

        A line that is a whole valid event and lacks only its newline is completed in
        place. Anything else is a write cut short: its bytes move to
        ``ledger.jsonl.torn-<offset>`` and a note naming that file is appended, so the
        ledger itself says what was set aside.
        """
        size = os.fstat(fd).st_size
        if size == 0:
            return b""
        if os.pread(fd, 1, size - 1) == b"\n":
            return b""
        # Find the start of the unterminated last line.
        start, block = size, 65536
        while start > 0:
            lo = max(0, start - block)
            chunk = os.pread(fd, start - lo, lo)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                start = lo + nl + 1
                break
            start = lo
        tail = os.pread(fd, size - start, start)
        try:
            LedgerEvent.model_validate_json(tail)
        except ValidationError:
            pass
        else:
            os.pwrite(fd, b"\n", size)
            return b""
        aside = self.workspace / f"{self.FILENAME}.torn-{start}"
        aside.write_bytes(tail)
        os.ftruncate(fd, start)
        note = LedgerEvent.new(
            "note",
            {
                "level": "warning",
                "text": f"a torn last line ({len(tail)} bytes at byte {start}, a write cut "
                f"short) was moved to {aside.name}",
            },
        )
        return (note.model_dump_json() + "\n").encode()

    def append(self, kind: EventKind, data: dict[str, Any] | BaseModel) -> LedgerEvent:
        payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
        event = LedgerEvent.new(kind, payload)
        line = (event.model_dump_json() + "\n").encode()
        with self._locked() as fd:
            line = self._quarantine_torn_tail(fd) + line
            written = os.write(fd, line)
            if written != len(line):  # pragma: no cover - a full disk
                raise LedgerError(f"short write to {self.path}: disk full?")
            os.fsync(fd)
        return event

    # Convenience writers: one per record type.
    def set_case(self, case: Case) -> None:
        self.append("case", case)

    def add_finding(self, finding: Finding) -> Finding:
        self.append("finding", finding)
        return finding

    def put_hypothesis(self, hyp: Hypothesis) -> Hypothesis:
        self.append("hypothesis", hyp)
        return hyp

    def update_hypothesis(self, hyp_id: str, **changes: Any) -> Hypothesis:
        state = self.state()
        if hyp_id not in state.hypotheses:
            raise LedgerError(f"no hypothesis {hyp_id!r} in {self.path}")
        hyp = state.hypotheses[hyp_id].model_copy(update=changes)
        Hypothesis.model_validate(hyp.model_dump())
        self.append("hypothesis", hyp)
        return hyp

    def add_evidence(self, ev: Evidence) -> Evidence:
        self.append("evidence", ev)
        return ev

    def set_verdict(self, verdict: Verdict) -> Verdict:
        """Record a verdict; refuse one the evidence does not carry.

        Anything but ``unknown`` must name a supported hypothesis and cite, in its chain, at
        least one piece of execution evidence about that hypothesis whose result is
        ``supported`` (a reproducer, a replay, a rerun under one policy, ...). A static
        finding, a refuted reproducer or an inconclusive trace never carries a verdict.
        """
        state = self.state()
        from .records import EXECUTION_KINDS

        chain = [e for e in state.evidence if e.id in set(verdict.evidence)]
        missing = set(verdict.evidence) - {e.id for e in chain}
        if missing:
            raise LedgerError(f"verdict cites unknown evidence: {', '.join(sorted(missing))}")
        if verdict.hypothesis is not None:
            hyp = state.hypotheses.get(verdict.hypothesis)
            if hyp is None:
                raise LedgerError(f"verdict names unknown hypothesis {verdict.hypothesis!r}")
            if hyp.status != HypothesisStatus.supported:
                raise LedgerError(
                    f"hypothesis {hyp.id} is {hyp.status.value}, not supported: "
                    "only a supported hypothesis can carry a verdict"
                )
        if verdict.classification != "unknown":
            if verdict.hypothesis is None:
                raise LedgerError(
                    f"a '{verdict.classification.value}' verdict must name the supported "
                    "hypothesis it rests on and cite execution evidence that supports it; "
                    "without them the honest verdict is 'unknown'"
                )
            if not any(
                e.kind in EXECUTION_KINDS
                and e.result == "supported"
                and verdict.hypothesis in e.hypotheses
                for e in chain
            ):
                raise LedgerError(
                    "a verdict other than 'unknown' needs execution evidence in its chain "
                    f"(reproducer, replay, byte compare, trace or rerun) that supports {verdict.hypothesis}"
                )
        self.append("verdict", verdict)
        return verdict

    def require_hypotheses(self, ids: list[str]) -> None:
        """Evidence may only name hypotheses the ledger holds (a typo would cite nothing)."""
        if ids:
            known = self.state().hypotheses
            missing = [h for h in ids if h not in known]
            if missing:
                have = ", ".join(sorted(known)[:8]) or "none yet"
                raise InputError(
                    f"unknown hypothesis id(s) {', '.join(missing[:10])}; the ledger has {have}"
                )

    def note(self, text: str, **extra: Any) -> None:
        self.append("note", {"text": text, **extra})

    def stage(self, stage: str, status: str, **extra: Any) -> None:
        self.append("stage", {"stage": stage, "status": status, **extra})

    def artifact(self, path: str | os.PathLike[str], role: str = "") -> Artifact:
        """Describe a file for an Evidence record: path (workspace-relative when inside), sha256."""
        p = Path(path)
        if not p.is_file():
            raise LedgerError(f"artifact {p} does not exist")
        try:
            shown = str(p.resolve().relative_to(self.workspace.resolve()))
        except ValueError:
            shown = str(p.resolve())
        return Artifact(path=shown, sha256=sha256_file(p), bytes=p.stat().st_size, role=role)

    # -- reading ---------------------------------------------------------------------------
    def read_events(self) -> tuple[list[LedgerEvent], TornTail | None]:
        if not self.path.exists():
            return [], None
        raw = self.path.read_bytes()
        events: list[LedgerEvent] = []
        torn: TornTail | None = None
        offset = 0
        lines = raw.split(b"\n")
        for lineno, line in enumerate(lines, start=1):
            is_last = lineno == len(lines)
            if is_last:
                if line:  # no terminating newline: a torn write
                    torn = TornTail(offset=offset, length=len(line))
                break
            if line.strip():
                try:
                    events.append(LedgerEvent.model_validate_json(line))
                except ValidationError as exc:
                    first = exc.errors()[0]
                    where = ".".join(str(p) for p in first["loc"]) or "line"
                    raise LedgerError(
                        f"{self.path}:{lineno} (byte {offset}) is corrupted: {where}: "
                        f"{first['msg']}; the ledger is append-only, inspect that line by hand"
                    ) from None
            offset += len(line) + 1
        return events, torn

    def state(self) -> LedgerState:
        events, torn = self.read_events()
        st = LedgerState(torn_tail=torn, events=len(events))
        for lineno, ev in enumerate(events, start=1):
            try:
                _fold(st, ev)
            except ValidationError as exc:
                raise LedgerError(
                    f"{self.path}: event {lineno} ({ev.kind}) does not validate: "
                    f"{exc.errors()[0]['msg']}"
                ) from None
        # Evidence recorded again under the same id (work redone after an interruption)
        # keeps its first position and its latest content.
        by_id = {e.id: e for e in st.evidence}
        st.evidence = [by_id[i] for i in dict.fromkeys(e.id for e in st.evidence)]
        return st


def _fold(st: LedgerState, ev: LedgerEvent) -> None:
    if ev.kind == "case":
        st.case = Case.model_validate(ev.data)
    elif ev.kind == "finding":
        f = Finding.model_validate(ev.data)
        st.findings[f.id] = f
    elif ev.kind == "hypothesis":
        h = Hypothesis.model_validate(ev.data)
        st.hypotheses[h.id] = h
    elif ev.kind == "evidence":
        st.evidence.append(Evidence.model_validate(ev.data))
    elif ev.kind == "verdict":
        v = Verdict.model_validate(ev.data)
        st.verdict = v
        st.verdicts.append(v)
    elif ev.kind == "note":
        st.notes.append({"ts": ev.ts, **ev.data})
    elif ev.kind == "stage":
        st.stages.append({"ts": ev.ts, **ev.data})


def dumps_state(state: LedgerState) -> str:
    return json.dumps(state.model_dump(mode="json"), indent=2)

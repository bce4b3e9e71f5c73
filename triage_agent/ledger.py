"""The evidence ledger: an append-only JSONL event log; current state is a fold over it.

Durability rules:
- every append takes an exclusive ``flock`` on the log, writes one whole line with a single
  ``write`` on an O_APPEND descriptor, flushes and fsyncs, so concurrent writers from several
  processes never interleave or lose a record;
- a torn last line (a crash mid-write) is reported with its byte offset and ignored by
  readers; the next writer moves those bytes to ``ledger.jsonl.torn-<offset>`` before it
  appends, so they are kept for inspection and never glued to a new record;
- a corrupted line anywhere else is a LedgerError naming the line: never a silent skip;
- a write that obeys a rule (``ledger_rules``: a status needs execution evidence, a verdict
  needs a supported hypothesis, one case per ledger) folds the state, checks the rule and
  appends under the same lock, so it never acts on state another writer changed meanwhile
  and an update of a record never loses a concurrent update of another field.
Nothing is rewritten in place.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import ledger_rules as rules
from .errors import InputError, LedgerError
from .evidence_data import MetricsData
from .records import (
    Artifact,
    Case,
    Evidence,
    EvidenceKind,
    Finding,
    Hypothesis,
    Verdict,
    new_id,
    utcnow,
)

# 2: evidence data is typed by its kind (evidence_data.py). A version-1 line is read the same
# way: its keys land in the fields of its kind's model, any other key in ``extra``, kept.
SCHEMA_VERSION = 2
EventKind = Literal["case", "finding", "hypothesis", "evidence", "verdict", "note", "stage"]
Payload = dict[str, Any] | BaseModel


def _payload(data: Payload) -> dict[str, Any]:
    return data.model_dump(mode="json") if isinstance(data, BaseModel) else data


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

    def confirmed_step(self) -> int | None:
        """The first step whose metric bits differ, as last confirmed from the metric
        fingerprints (by ``triage run`` or the MCP ``confirm_mismatch``); None until then.
        A step only given in the case is not confirmed."""
        for ev in reversed(self.evidence):
            if ev.kind == EvidenceKind.metrics and ev.data_as(MetricsData).step is not None:
                return ev.data_as(MetricsData).step
        for st in reversed(self.stages):
            if st.get("stage") == "confirm" and isinstance(st.get("step"), int):
                return st["step"]
        return None


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

    def _write(self, fd: int, pending: list[tuple[EventKind, Payload]]) -> list[LedgerEvent]:
        """Append ``pending`` as whole lines in one write; the caller holds the lock."""
        events = [LedgerEvent.new(kind, _payload(data)) for kind, data in pending]
        if not events:
            return []
        line = self._quarantine_torn_tail(fd) + b"".join(
            (e.model_dump_json() + "\n").encode() for e in events
        )
        written = os.write(fd, line)
        if written != len(line):  # pragma: no cover - a full disk
            raise LedgerError(f"short write to {self.path}: disk full?")
        os.fsync(fd)
        return events

    def _transact(
        self, decide: Callable[[LedgerState], list[tuple[EventKind, Payload]]]
    ) -> list[LedgerEvent]:
        """Fold the state, let ``decide`` check it and name what to append, append that: all
        under one lock, so no other writer can change the state in between."""
        with self._locked() as fd:
            return self._write(fd, decide(self.state()))

    def append(self, kind: EventKind, data: Payload) -> LedgerEvent:
        with self._locked() as fd:
            (event,) = self._write(fd, [(kind, data)])
        return event

    # Convenience writers: one per record type. Those that obey a rule check it under the lock.
    def set_case(self, case: Case) -> None:
        self.append("case", case)

    def record_case(self, case: Case) -> bool:
        """Append ``case`` unless the ledger holds it already; returns whether it did. A
        different case is refused: one workspace's ledger belongs to one case."""

        def decide(st: LedgerState) -> list[tuple[EventKind, Payload]]:
            return [("case", case)] if rules.case_is_new(st, case, str(self.path)) else []

        return bool(self._transact(decide))

    def add_finding(self, finding: Finding) -> Finding:
        self.append("finding", finding)
        return finding

    def put_hypothesis(self, hyp: Hypothesis) -> Hypothesis:
        """Record ``hyp`` as it is; it may rest only on findings the ledger holds."""

        def decide(st: LedgerState) -> list[tuple[EventKind, Payload]]:
            rules.check_findings(st, hyp)
            return [("hypothesis", hyp)]

        self._transact(decide)
        return hyp

    def update_hypothesis(
        self,
        hyp_id: str,
        *,
        evidence: list[str] | None = None,
        reason: str | None = None,
        **changes: Any,
    ) -> Hypothesis:
        """Change fields of the hypothesis as the ledger holds it now (no update is lost).

        A ``supported`` or ``refuted`` status needs execution evidence about it with that
        result: among ``evidence`` when given, else anywhere in the ledger; against evidence
        that says the opposite, also a ``reason``, kept as the hypothesis' status_reason."""
        out: list[Hypothesis] = []

        def decide(st: LedgerState) -> list[tuple[EventKind, Payload]]:
            if hyp_id not in st.hypotheses:
                raise LedgerError(f"no hypothesis {hyp_id!r} in {self.path}")
            hyp = Hypothesis.model_validate(
                {**st.hypotheses[hyp_id].model_dump(), **changes, "id": hyp_id}
            )
            if "status" in changes:
                # the reason belongs to the status it was given for, and only where needed
                needed = rules.check_status(st, hyp_id, hyp.status, evidence, reason or "")
                hyp = hyp.model_copy(update={"status_reason": (reason or "") if needed else ""})
            out.append(hyp)
            return [("hypothesis", hyp)]

        self._transact(decide)
        return out[0]

    def add_evidence(self, ev: Evidence) -> Evidence:
        self.append("evidence", ev)
        return ev

    def set_verdict(self, verdict: Verdict) -> Verdict:
        """Record a verdict; refuse one the evidence does not carry (``ledger_rules``)."""

        def decide(st: LedgerState) -> list[tuple[EventKind, Payload]]:
            nonlocal verdict
            rules.check_verdict(st, verdict)
            # a caveat recorded anywhere (an abnormal exit) travels with every verdict, the
            # headless workflow's and an assistant's alike: none can leave it out
            held = [n["text"] for n in st.notes if n.get("caveat")]
            if held:
                caveats = list(dict.fromkeys([*verdict.caveats, *held]))
                verdict = verdict.model_copy(update={"caveats": caveats})
            return [("verdict", verdict)]

        self._transact(decide)
        return verdict

    def require_hypotheses(self, ids: list[str]) -> None:
        """Evidence may only name hypotheses the ledger holds (a typo would cite nothing).

        Hypotheses are never removed, so a check passed here stays true at the append."""
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

    def caveat(self, text: str, **extra: Any) -> None:
        """A note every verdict recorded from now on carries (``Verdict.caveats``)."""
        self.append("note", {"text": text, "caveat": True, **extra})

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

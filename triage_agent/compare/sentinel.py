"""Reading sentinel recordings: where two runs first part, and which rank disagrees with its peers.

A sentinel recording (``triage record --sentinel``) holds, per rank and step, the digests of
what crossed rank boundaries (each collective's input and output buffers) and of what the
optimizer wrote (each parameter it holds, after its step). Two readings follow from it with
no relaunch:

* :func:`locate` pairs two recordings step by step and rank by rank and returns the first
  step at which any rank's records differ, the ranks that differ there, and, per rank,
  the first differing record. A rank *starts* the divergence when its first differing
  record is not a collective's output whose inputs on that rank were equal: a difference
  that arrived through a reduction is received, not made, on that rank.
* :func:`device_suspects` reads one recording alone. Buffers that a collective leaves
  equal on every member of its group (``all_reduce``, ``broadcast``, ``all_gather``'s
  outputs) and parameters that every rank holds whole (data parallel without sharding)
  must agree across ranks. A rank whose digest differs from its peers', where at least two
  peers agree with each other, is a device suspect at the first step it happens (silent
  data corruption: the seeds' "corruption detection"). Two ranks that disagree with no
  third to break the tie are reported as a disagreement, never as a suspect.

Only records that are meant to be equal are read against each other: parameters of equal
name, shape and dtype on every rank (a ZeRO partition differs by design and is left out
when no two ranks agree), collective outputs of one group, matched by their place in the
step's sequence of that collective.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from ..errors import InputError
from ..trace_format import INIT_STEP

# collectives whose output buffer is the same on every member of the group
_EQUAL_OUTPUTS = {"all_reduce", "broadcast", "all_gather", "all_gather_into_tensor"}


class Record(BaseModel):
    """One sentinel record of a rank's step: a collective or a parameter the optimizer wrote."""

    kind: str
    name: str
    index: int = Field(description="the how-manieth record of this kind and name in the step")
    inputs: list[str] = Field(default_factory=list, description="digests, in order")
    outputs: list[str] = Field(default_factory=list)
    shapes: list[str] = Field(default_factory=list, description="dtype[shape] of each output")
    group: list[int] | None = None
    caller: str | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return self.kind, self.name, self.index

    def label(self) -> str:
        what = "parameter" if self.kind == "optimizer" else self.name
        where = f" {self.name}" if self.kind == "optimizer" else f" #{self.index}"
        return f"{what}{where}"


class RankFirst(BaseModel):
    rank: int
    record: str = Field(description="the rank's first differing record, in words")
    starts: bool = Field(description="the difference is made on this rank, not received")
    caller: str | None = None


class SentinelDivergence(BaseModel):
    step: int | None = Field(description="the first step any rank's records differ; None: none")
    ranks: list[int] = Field(default_factory=list, description="ranks whose records differ there")
    starts: list[int] = Field(default_factory=list, description="ranks where it is made")
    firsts: list[RankFirst] = Field(default_factory=list)
    steps_compared: int = 0
    notes: list[str] = Field(default_factory=list, description="what could not be compared")

    def summary(self) -> str:
        if self.step is None:
            return f"the sentinel records agree on every one of {self.steps_compared} steps"
        return (
            f"first divergent step {self.step} on rank(s) {self.ranks}, made on "
            f"{self.starts or 'no rank alone (every difference arrived through a collective)'}"
        )


class DeviceSuspect(BaseModel):
    step: int
    rank: int
    record: str
    peers: list[int] = Field(description="the ranks that agree with each other and not with it")
    reason: str


class Disagreement(BaseModel):
    step: int
    ranks: list[int]
    record: str


class DeviceCheck(BaseModel):
    suspects: list[DeviceSuspect] = Field(default_factory=list)
    ties: list[Disagreement] = Field(
        default_factory=list, description="ranks that disagree with no majority to say which"
    )
    steps_read: int = 0


# -- reading a recording -------------------------------------------------------------------
def _rank_files(root: Path) -> dict[int, list[Path]]:
    root = Path(root)
    out: dict[int, list[Path]] = {}
    for d in sorted(root.glob("rank*")):
        if not (d.is_dir() and d.name[4:].isdigit()):
            continue
        r = int(d.name[4:])
        files = [seg / f"trace_rank{r:05d}.jsonl" for seg in sorted(d.glob("seg*"))]
        out[r] = [f for f in files if f.is_file()]
    if not out:
        raise InputError(
            f"{root} holds no recording (no rank*/ directories): record with "
            "`triage record --sentinel -- COMMAND` first"
        )
    return out


def _digest(d: dict | None) -> str:
    if d is None:
        return "-"
    return str(d.get("value") or d.get("digest")) + "/" + str(d.get("order") or "")


def read_rank(files: list[Path]) -> tuple[dict[int, list[Record]], str | None]:
    """Step -> the rank's records in order, and the level the recording was made at.

    A step recorded twice (a resumed process that replays steps) keeps its later records:
    the resumed run is what trained on. Only completed steps (with a ``step_end``) count.
    """
    steps: dict[int, list[Record]] = {}
    level = None
    for f in files:
        pending: dict[int, list[Record]] = {}
        counts: dict[int, Counter] = {}
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a torn last line of a killed rank
            t = rec.get("type")
            if t == "header":
                level = (rec.get("config") or {}).get("level", level)
            elif t == "event" and rec.get("kind") in ("collective", "optimizer"):
                s = int(rec["step"])
                if s == INIT_STEP:
                    continue
                c = counts.setdefault(s, Counter())
                key = (rec["kind"], rec["name"])
                outs = [o for o in rec.get("outputs", [])]
                pending.setdefault(s, []).append(
                    Record(
                        kind=rec["kind"],
                        name=rec["name"],
                        index=c[key],
                        inputs=[_digest(d) for d in rec.get("inputs", [])],
                        outputs=[_digest(d) for d in outs],
                        shapes=[f"{o['dtype']}{o['shape']}" if o else "-" for o in outs],
                        group=(rec.get("meta") or {}).get("group")
                        if rec["kind"] == "collective"
                        else None,
                        caller=rec.get("caller"),
                    )
                )
                c[key] += 1
            elif t == "step_end" and int(rec["step"]) != INIT_STEP:
                s = int(rec["step"])
                steps[s] = pending.pop(s, [])
    return steps, level


def read_recording(root: Path) -> dict[int, dict[int, list[Record]]]:
    """Rank -> step -> records, for every rank of the recording under ``root``."""
    out = {}
    for r, files in _rank_files(root).items():
        out[r], level = read_rank(files)
        if level not in (None, "sentinel", "collective"):
            raise InputError(
                f"{root} was recorded at {level} level; the sentinel reading needs "
                "`triage record --sentinel` (or --level collective)"
            )
    return out


# -- two runs ------------------------------------------------------------------------------
def _first_difference(a: list[Record], b: list[Record]) -> tuple[str, bool, str | None] | None:
    """(the first differing record in words, whether it is made here, its caller), or None."""
    bk = {r.key: r for r in b}
    for ra in a:
        rb = bk.get(ra.key)
        if rb is None:
            return f"{ra.label()} is recorded in A only", True, ra.caller
        if ra.inputs != rb.inputs:
            return f"{ra.label()}'s input", True, ra.caller
        if ra.outputs != rb.outputs:
            received = ra.kind == "collective"
            side = "output (its inputs on this rank equal)" if received else "value after the step"
            return f"{ra.label()}'s {side}", not received, ra.caller
    ak = {r.key for r in a}
    extra = [r for r in b if r.key not in ak]
    if extra:
        return f"{extra[0].label()} is recorded in B only", True, extra[0].caller
    return None


def locate(root_a: Path, root_b: Path) -> SentinelDivergence:
    """The first step at which two sentinel recordings differ, and the ranks where it starts."""
    ra, rb = read_recording(root_a), read_recording(root_b)
    notes = []
    if sorted(ra) != sorted(rb):
        notes.append(f"A recorded ranks {sorted(ra)}, B ranks {sorted(rb)}: only shared ranks read")
    ranks = sorted(set(ra) & set(rb))
    steps = sorted(set.intersection(*(set(ra[r]) & set(rb[r]) for r in ranks)) if ranks else [])
    for r in ranks:
        only = sorted(set(ra[r]) ^ set(rb[r]))
        if only:
            notes.append(f"rank {r}: steps {only[:5]} are held by one recording only")
    for s in steps:
        firsts = []
        for r in ranks:
            d = _first_difference(ra[r][s], rb[r][s])
            if d is not None:
                firsts.append(RankFirst(rank=r, record=d[0], starts=d[1], caller=d[2]))
        if firsts:
            return SentinelDivergence(
                step=s,
                ranks=[f.rank for f in firsts],
                starts=[f.rank for f in firsts if f.starts],
                firsts=firsts,
                steps_compared=steps.index(s) + 1,
                notes=notes,
            )
    return SentinelDivergence(step=None, steps_compared=len(steps), notes=notes)


# -- one run: ranks against their peers ----------------------------------------------------
def _odd_one(values: dict[int, tuple]) -> tuple[int, list[int]] | list[int] | None:
    """(the one rank that differs, the peers that agree), the ranks of a tie, or None."""
    counts = Counter(values.values())
    if len(counts) <= 1:
        return None
    common, n = counts.most_common(1)[0]
    odd = [r for r, v in values.items() if v != common]
    if len(odd) == 1 and n >= 2 and n == len(values) - 1:
        return odd[0], sorted(r for r, v in values.items() if v == common)
    if len(values) == 2:
        return sorted(values)
    return None  # no single rank against an agreeing majority: a partition, not a fault


def device_suspects(root: Path) -> DeviceCheck:
    """Ranks of one recording whose buffers differ from their peers' where all must agree."""
    rec = read_recording(root)
    ranks = sorted(rec)
    steps = sorted(set.intersection(*(set(rec[r]) for r in ranks))) if ranks else []
    check = DeviceCheck(steps_read=len(steps))
    flagged: set[int] = set()
    # a parameter is held whole where, at the first step it is read, all ranks but at most
    # one agree: a sharded partition never does, so it is never read against its peers
    whole: dict[tuple, bool] = {}
    for s in steps:
        by_key: dict[tuple, dict[int, Record]] = {}
        for r in ranks:
            for x in rec[r][s]:
                by_key.setdefault(x.key, {})[r] = x
        for key, per_rank in by_key.items():
            first = next(iter(per_rank.values()))
            if first.kind == "collective":
                if first.name not in _EQUAL_OUTPUTS:
                    continue
                members = first.group or ranks
                if any(x.group != first.group for x in per_rank.values()):
                    continue
                per_rank = {r: x for r, x in per_rank.items() if r in members}
            if len(per_rank) < 2 or len({tuple(x.shapes) for x in per_rank.values()}) > 1:
                continue
            values = {r: tuple(x.outputs) for r, x in per_rank.items()}
            if first.kind == "optimizer":
                if key not in whole:
                    top = Counter(values.values()).most_common(1)[0][1]
                    whole[key] = top == len(values) or (top >= 2 and top == len(values) - 1)
                if not whole[key]:
                    continue
            found = _odd_one(values)
            if found is None:
                continue
            if isinstance(found, tuple):
                rank, peers = found
                if rank in flagged:
                    continue
                flagged.add(rank)
                reason = (
                    f"its {first.name} output differs from its group's"
                    if first.kind == "collective"
                    else "its copy of a parameter every rank holds whole differs after the "
                    "update from its peers', which agree, while the step's collectives agreed: "
                    "the bytes changed on this rank between the reduction and the update"
                )
                check.suspects.append(
                    DeviceSuspect(
                        step=s, rank=rank, record=first.label(), peers=peers, reason=reason
                    )
                )
            elif (not check.ties or check.ties[0].step == s) and len(check.ties) < 8:
                # the first step of a tie only: what follows from it differs the same way
                check.ties.append(Disagreement(step=s, ranks=found, record=first.label()))
    return check

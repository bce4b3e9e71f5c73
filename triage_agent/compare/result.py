"""What a comparison returns (pydantic v2): the workflow, the MCP server and the CLI all
render these, never re-derive them. ``CompareResult.schema_id`` versions the JSON form."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

COMPARE_SCHEMA = "bitwise-triage.compare/2"


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EventRef(_M):
    """Where an event is: run ('a'/'b'), position in its rank's stream, file and line."""

    run: Literal["a", "b"]
    rank: int
    index: int = Field(description="0-based position in the rank's execution order")
    seq: int
    line: int = Field(description="1-based line (or record number) in the source file")
    file: str
    step: int
    kind: str
    name: str
    scope: str
    call: int
    phase: str
    caller: str | None = None
    dump: str | None = None

    def where(self) -> str:
        """'aten::mm [layers.0] step 3 #41 (trace_rank00000.jsonl:43) from train.py:12'"""
        site = f" from {self.caller}" if self.caller else ""
        return (
            f"{self.name} [{self.scope or '<root>'}] step {self.step} #{self.index} "
            f"({Path(self.file).name}:{self.line}){site}"
        )


class Label(_M):
    """A known pattern that changes how a mismatch must be read."""

    code: Literal[
        "uncaptured-upstream",
        "probe-artifact",
        "possible-race",
        "collective",
        "no-input-digests",
        "no-inputs-recorded",
        "inner-diverged",
        "absorbed",
        "inputs-incomplete",
        "permuted-inputs",
    ]
    message: str


class Producer(_M):
    """Where one differing input of a receiver came from, in one run: the last earlier event
    of the same run and rank with an output of that digest. Follow ``event`` upstream."""

    input: int = Field(description="position of the input in the receiver's inputs")
    run: Literal["a", "b"]
    digest: str | None = Field(description="the input's digest signature in this run")
    event: EventRef | None = Field(
        description="the producer; None: no traced event before the receiver wrote it "
        "(it comes from outside the capture, or from before the window)"
    )
    output: int | None = Field(default=None, description="which output of the producer")
    searched: int = Field(description="earlier events looked at (the search is bounded)")

    def describe(self) -> str:
        if self.event is None:
            return (
                f"input {self.input} in {self.run.upper()}: no traced event in the "
                f"{self.searched} before it wrote it (from outside the capture or the window)"
            )
        return f"input {self.input} in {self.run.upper()}: output {self.output} of {self.event.where()}"


class Divergence(_M):
    """One paired event whose digests differ, or one event with no counterpart."""

    role: Literal["origin", "receiver", "extra", "missing", "observed"] = Field(
        description="origin: inputs equal, outputs differ; receiver: inputs differ; "
        "extra: an event only B executes; missing: an event only A executes; observed: the "
        "format records no input digests, so origin and receiver cannot be told apart"
    )
    a: EventRef | None
    b: EventRef | None
    inputs_equal: bool | None = None
    differing_inputs: list[int] = Field(default_factory=list)
    differing_outputs: list[int] = Field(default_factory=list)
    labels: list[Label] = Field(default_factory=list)
    producers: list[Producer] = Field(
        default_factory=list,
        description="for a receiver: the producer of each differing input, in A and in B",
    )


class Candidate(_M):
    """A first-divergence candidate: the origin, or an event one run executes and the other
    does not. An event that writes state (an optimizer step, an in-place op, a collective)
    changes what every later event reads, so its surplus or absence can be the cause."""

    kind: Literal["origin", "extra", "missing"] = Field(
        description="origin: inputs equal, outputs differ; extra: only B executes it; "
        "missing: only A executes it"
    )
    run: Literal["a", "b", "both"] = Field(description="the run(s) that execute it")
    rank: int
    step: int
    event: str = Field(description="scope::name")
    event_kind: str = Field(description="op, module, optimizer, collective, metric")
    phase: str
    call_site: str | None = Field(description="file:line of the code that ran it, when recorded")
    function: str | None = Field(
        default=None,
        description="the function around the call site named as a patch target "
        "(pkg.mod:Qual.name, what suppress, replace and isolate-rng take), where the case "
        "places the file under the run's working directory; none for the launched script, "
        "module level or a nested function",
    )
    writes_state: bool
    state_write: str = Field(default="", description="what state it writes, when it does")
    order: float = Field(
        description="position in A's execution order; an event only B executes sits between "
        "the A events around it (x.5)"
    )
    a: EventRef | None = None
    b: EventRef | None = None

    def describe(self) -> str:
        """'only B executes optimizer step (Adam) at <root>::w, step 0, from train.py:42'"""
        who = {
            "origin": "origin (inputs equal, outputs differ):",
            "extra": "only B executes",
            "missing": "only A executes",
        }[self.kind]
        what = self.state_write or f"{self.event_kind} event"
        site = f", from {self.call_site}" if self.call_site else ", call site not recorded"
        return f"{who} {what} at {self.event}, rank {self.rank} step {self.step}{site}"


class Unmatched(_M):
    """An event of one run with no counterpart in the other, and where it would have been."""

    event: EventRef
    other_index: int = Field(description="position in the other run's stream it falls before")
    reason: Literal["extra", "missing", "reordered", "after-truncation"]


class Widen(_M):
    """What to capture next when no origin lies on the traced events."""

    steps: str | None = None
    ranks: str | None = None
    level: str | None = None
    scope: str | None = None

    def sentences(self) -> str:
        """The advice as sentences a person reads, in the order steps, ranks, level, scope."""
        parts = [p for p in (self.steps, self.ranks, self.level, self.scope) if p]
        return " ".join(p[0].upper() + p[1:] + ("" if p.endswith(".") else ".") for p in parts)


class Collectives(_M):
    """A rank's collectives, counted where the cross-rank pass needs them: once a peer of the
    same run stopped early, what a rank did after the collectives that peer never reached
    is that peer's death (a collective with nobody on the other end), not a finding."""

    recorded: dict[str, int] = Field(
        default_factory=dict,
        description="per run ('a', 'b') whose trace of this rank stopped early: its collectives",
    )
    through_first: dict[str, int] = Field(
        default_factory=dict,
        description="per run: collectives this rank ran up to its first divergence, inclusive",
    )
    through_origin: dict[str, int] = Field(
        default_factory=dict, description="the same, up to its origin"
    )


class RankResult(_M):
    rank: int
    # incomplete: no divergence up to where a run's rank stopped (torn, or no end record);
    # what it would have done after is unknown, so it is never called identical
    status: Literal["identical", "diverged", "incomplete", "only-in-a", "only-in-b"]
    events_a: int
    events_b: int
    matched: int = 0
    differing: int = Field(default=0, description="paired events whose digests differ")
    alignment: Literal["exact", "anchored", "keyed", "none"] = "none"
    first_divergence: Divergence | None = None
    origin: Divergence | None = None
    candidates: list[Candidate] = Field(
        default_factory=list,
        description="first-divergence candidates in execution order: every event one run "
        "executes and the other does not, up to the origin, then the origin",
    )
    candidates_total: int = Field(
        default=0, description="candidates before capping the list (state writers kept first)"
    )
    first_receiver: Divergence | None = Field(
        default=None,
        description="the first paired event whose inputs already differ and whose outputs "
        "differ too, with the producer of each differing input: walk upstream from here",
    )
    artifacts: list[Divergence] = Field(
        default_factory=list, description="labelled mismatches set aside before the origin"
    )
    outside_scope: Widen | None = None
    unmatched: list[Unmatched] = Field(default_factory=list)
    unmatched_total: int = 0
    notes: list[str] = Field(default_factory=list)
    # for the cross-rank pass only (engine.assemble); not part of the reported result
    collectives: Collectives | None = Field(default=None, exclude=True)

    @property
    def structural_candidates(self) -> list[Candidate]:
        """The candidates that are events one run executes and the other does not."""
        return [c for c in self.candidates if c.kind != "origin"]


class CrossRank(_M):
    """Which ranks hold origins and which only receive; no global order is implied."""

    origin_ranks: list[int] = Field(default_factory=list)
    receiver_only_ranks: list[int] = Field(default_factory=list)
    outside_scope_ranks: list[int] = Field(default_factory=list)
    unmatched_first_ranks: list[int] = Field(
        default_factory=list,
        description="ranks whose first candidate is an event one run executes and the other "
        "does not (whether or not an origin follows)",
    )
    identical_ranks: list[int] = Field(default_factory=list)
    incomplete_ranks: list[int] = Field(
        default_factory=list,
        description="ranks equal as far as they go, where a run stopped early (killed, hung)",
    )
    unpaired_ranks: list[int] = Field(default_factory=list)
    earliest_step: int | None = Field(
        default=None, description="lowest step holding a first divergence on any rank"
    )
    note: str = ""


class RunInfo(_M):
    path: str
    fmt: str
    run_id: str
    world_size: int | None
    ranks: list[int]


class CompareResult(_M):
    schema_id: str = COMPARE_SCHEMA
    status: Literal["identical", "diverged"]
    complete: bool = Field(description="False when a rank was torn, missing or cut short")
    a: RunInfo
    b: RunInfo
    mapping: str | None = None
    ranks: list[RankResult]
    summary: CrossRank
    warnings: list[str] = Field(default_factory=list)

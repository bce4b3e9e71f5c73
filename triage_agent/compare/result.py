"""What a comparison returns (pydantic v2): the workflow, the MCP server and the CLI all
render these, never re-derive them. ``CompareResult.schema_id`` versions the JSON form."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

COMPARE_SCHEMA = "bitwise-triage.compare/1"


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
    ]
    message: str


class Divergence(_M):
    """One paired event whose digests differ, or one event with no counterpart."""

    role: Literal["origin", "receiver", "structural", "observed"] = Field(
        description="origin: inputs equal, outputs differ; receiver: inputs differ; "
        "structural: an event one run has and the other lacks; observed: the format records "
        "no input digests, so origin and receiver cannot be told apart"
    )
    a: EventRef | None
    b: EventRef | None
    inputs_equal: bool | None = None
    differing_inputs: list[int] = Field(default_factory=list)
    differing_outputs: list[int] = Field(default_factory=list)
    labels: list[Label] = Field(default_factory=list)


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


class RankResult(_M):
    rank: int
    status: Literal["identical", "diverged", "only-in-a", "only-in-b"]
    events_a: int
    events_b: int
    matched: int = 0
    differing: int = Field(default=0, description="paired events whose digests differ")
    alignment: Literal["exact", "anchored", "keyed", "none"] = "none"
    first_divergence: Divergence | None = None
    origin: Divergence | None = None
    artifacts: list[Divergence] = Field(
        default_factory=list, description="labelled mismatches set aside before the origin"
    )
    outside_scope: Widen | None = None
    unmatched: list[Unmatched] = Field(default_factory=list)
    unmatched_total: int = 0
    notes: list[str] = Field(default_factory=list)


class CrossRank(_M):
    """Which ranks hold origins and which only receive; no global order is implied."""

    origin_ranks: list[int] = Field(default_factory=list)
    receiver_only_ranks: list[int] = Field(default_factory=list)
    outside_scope_ranks: list[int] = Field(default_factory=list)
    structural_ranks: list[int] = Field(default_factory=list)
    identical_ranks: list[int] = Field(default_factory=list)
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

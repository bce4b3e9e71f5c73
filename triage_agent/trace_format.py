"""The per-rank trace format (schema version 2). Pure pydantic: no torch import.

A trace directory holds one file per rank, ``trace_rank{R:05d}.jsonl``, written by that rank
alone. Line 1 is a ``header``; then ``event`` lines in execution order; a ``step_end`` line
closes each traced step (the writer flushes there, so a crashed rank keeps every completed
step); an ``end`` line closes a trace that finished cleanly.

An event is keyed, run-independently, by (step, scope, name, call); events before the
first training step (the init phase) have step ``INIT_STEP`` (-1). ``call`` counts the
invocations of ``name`` inside ``scope`` within ``step``. ``seq`` is the execution order on
that rank. Digests are of raw bit patterns (see triage_agent.fingerprint): ``digest`` is the
fast XOR-family digest, ``order`` the order-sensitive one when it was computed. Integer and
bool tensors carry the order-sensitive digest as ``digest`` (and as ``order``) whatever the
capture's digest mode; version 1 recorded their xor digest there, so a version 1 trace is
refused rather than compared with a version 2 one record by record.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TRACE_SCHEMA_VERSION = 2
TRACE_GLOB = "trace_rank*.jsonl"
# The step of every event before the first training step (model construction, the
# framework's initialisation): the init phase. Both runs' init phases pair by this value.
INIT_STEP = -1

EventKind = Literal["op", "module", "collective", "optimizer", "metric"]
Phase = Literal["forward", "backward", "optimizer", "other"]


def trace_filename(rank: int) -> str:
    return f"trace_rank{rank:05d}.jsonl"


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TensorDigest(_Rec):
    shape: list[int]
    dtype: str
    numel: int
    digest: str = Field(
        description="hex; the fast bit-pattern digest (the order-sensitive one for integer and "
        "bool tensors); 'empty' for numel == 0"
    )
    order: str | None = Field(default=None, description="hex; order-sensitive digest")
    value: str | None = Field(
        default=None, description="where digest is 'uninitialized': the bytes' digest all the same"
    )
    value_order: str | None = Field(default=None, description="likewise for the order digest")


class TraceHeader(_Rec):
    type: Literal["header"] = "header"
    schema_version: int = TRACE_SCHEMA_VERSION
    run_id: str
    rank: int
    world_size: int = 1
    coords: dict[str, int] = Field(default_factory=dict, description="dp/tp/pp/cp/ep coordinates")
    versions: dict[str, str | None] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict, description="capture settings")
    created: str
    host: str = ""
    argv: list[str] = Field(default_factory=list)
    tracer: str | None = Field(
        default=None, description="which tracer wrote the events: python or native (C++)"
    )


class TraceEvent(_Rec):
    type: Literal["event"] = "event"
    seq: int
    step: int
    kind: EventKind
    name: str
    scope: str = ""
    call: int = 0
    phase: Phase = "other"
    caller: str | None = Field(default=None, description="file:line of the user frame, when cheap")
    inputs: list[TensorDigest | None] = Field(default_factory=list)
    outputs: list[TensorDigest | None] = Field(default_factory=list)
    dump: str | None = Field(default=None, description="relative path of a tensor dump (.pt)")
    meta: dict[str, Any] = Field(default_factory=dict)


class StepEnd(_Rec):
    type: Literal["step_end"] = "step_end"
    step: int
    events: int


class TraceEnd(_Rec):
    type: Literal["end"] = "end"
    status: Literal["ok", "error"] = "ok"
    steps: list[int] = Field(default_factory=list)
    note: str = ""

"""Typed ``Evidence.data``: one model per evidence kind, a union discriminated by ``kind``.

Why: ``Evidence.data`` is a free dict today. Stage 2 writes keys that the engine, the report,
the ledger view and the MCP server read back as strings; a renamed key is silently None.
These models are the one place that says which keys each kind of evidence carries, so a
writer that builds ``TraceCompareData(...)`` and a reader that takes ``.trace_dirs`` agree
or fail loudly.

Reading never loses a recorded byte: ``parse_data`` reads evidence of any ledger version
into its model and keeps every key the model does not know, or a value of the wrong shape,
in ``extra``. Written back with ``dump_data`` the dict is the one that was read.

This module sits on the bottom layer (pydantic and the standard library only). Values whose
own models live higher up (a metric diff, a divergence, a capture config, a reproducer's
output) are held as JSON objects here; their owners validate them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

Json = dict[str, Any]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")

    extra: Json = Field(
        default_factory=dict,
        description="recorded keys this model does not know (older or newer writers): kept, "
        "never dropped",
    )


class StaticData(_Data):
    """A bounded static scan (stage 1)."""

    kind: Literal["static"] = "static"
    request: Json | None = Field(default=None, description="the ScanRequest that ran")
    top: list[str] = Field(default_factory=list, description="ids of the findings kept")


class MetricsData(_Data):
    """The metric bits compared: the first mismatching step and what kind of interval it is."""

    kind: Literal["metrics"] = "metrics"
    given_step: int | None = None
    step: int | None = Field(default=None, description="the first step whose bits differ")
    given_step_wrong: bool = False
    message: str = ""
    diff: Json | None = Field(default=None, description="the MetricDiff, common steps left out")
    phases: list[str] = Field(default_factory=list)
    facts: list[str] = Field(default_factory=list)
    ranks_differing: list[int] = Field(default_factory=list)
    source_differs: bool = False
    env_differs: dict[str, list[str | None]] = Field(default_factory=dict)
    declared: list[Json] = Field(
        default_factory=list,
        description="what the runs were told differently (kind, key, both values)",
    )
    metrics_a: str | None = None
    metrics_b: str | None = None
    failing_run: str | None = Field(
        default=None, description="the run that fails where the other completes"
    )
    failure: Json | None = Field(default=None, description="its failure and innermost frame")
    logs: list[str] = Field(default_factory=list, description="the failing run's log files")
    rerun: Json | None = Field(default=None, description="what ran: argv lists, durations")


class TraceCompareData(_Data):
    """Two traced runs aligned (the workflow's stage 2 or the MCP ``compare_traces``)."""

    kind: Literal["trace-compare"] = "trace-compare"
    status: Literal["identical", "diverged"] | None = None
    level: str | None = Field(default=None, description="capture level that gave the traces")
    steps: list[int] | None = Field(default=None, description="the traced step window")
    complete: bool | None = None
    warnings: list[str] = Field(default_factory=list)
    trace_dirs: dict[str, str] = Field(default_factory=dict, description="run name -> trace dir")
    summary: Json | None = Field(default=None, description="the cross-rank summary")
    rows: list[Json] = Field(default_factory=list, description="first divergence per rank")
    origin: Json | None = Field(default=None, description="the earliest origin (a Divergence)")
    origins: list[Json] = Field(default_factory=list, description="every rank's origin")
    origin_location: str | None = None
    first_location: str | None = None
    candidates: list[Json] = Field(
        default_factory=list, description="first-divergence candidates, in execution order"
    )
    widen: Json | None = Field(default=None, description="what to capture next")
    unmatched: list[Json] = Field(default_factory=list)
    explains: list[str] = Field(
        default_factory=list, description="supported hypotheses that explain the origin"
    )
    rng_state: Json | None = Field(default=None, description="generator states at the origin")
    rerun: Json | None = Field(default=None, description="the traced relaunches: argv, durations")


class ByteCompareData(_Data):
    """Dumped tensors of one event compared bit for bit (a ByteReport)."""

    kind: Literal["byte-compare"] = "byte-compare"
    a: str = ""
    b: str = ""
    equal: bool | None = None
    tensors: list[Json] = Field(default_factory=list)


class ReplayData(_Data):
    """An op replayed on its captured inputs (a ReplayResult), or the pair of replays
    (as captured, deterministic) that judged an origin's repeatability."""

    kind: Literal["replay"] = "replay"
    op: str | None = None
    policy: Json | None = Field(default=None, description="the ReplayPolicy it ran under")
    repeats: int | None = None
    device: str | None = None
    digest_algo: str | None = None
    runs: list[list[str | None]] = Field(default_factory=list)
    recorded: list[str | None] = Field(default_factory=list)
    distinct_runs: int | None = None
    repeatable: bool | None = None
    runs_matching_recorded: int | None = None
    trace_digest_match: list[bool] | None = None
    notes: list[str] = Field(default_factory=list)
    reproduces_recorded: bool | None = None
    dump: str | None = None
    as_captured: str | None = Field(default=None, description="evidence id of that replay")
    deterministic: str | None = Field(default=None, description="evidence id of that replay")
    deterministic_repeatable: bool | None = None


class ReproducerData(_Data):
    """A generated reproducer launched against the real framework."""

    kind: Literal["reproducer"] = "reproducer"
    output: Json | None = Field(default=None, description="the ReproducerOutput it printed")
    reproducer: str | None = None
    template: str | None = None
    params: Json = Field(default_factory=dict)
    launcher: str | None = None
    ranks: int | None = None
    returncode: int | None = None
    timed_out: bool = False
    skipped: bool = False
    stderr_tail: list[str] = Field(default_factory=list, description="when it failed")
    env_policy: Json | None = None
    env_set: dict[str, str] = Field(default_factory=dict)
    run_dir: str | None = None
    launch_notes: list[str] = Field(default_factory=list)


class BisectData(BaseModel):
    """One bisection probe as recorded: the key of the tree it ran and its ProbeResult, so a
    bisection resumed later reuses it instead of launching it again."""

    model_config = ConfigDict(extra="forbid")

    probe: str = Field(description="the key of the tree probed")
    result: Json = Field(description="the ProbeResult, without its evidence id")


class RerunData(_Data):
    """A run relaunched with one thing changed (a policy, an intervention, a reverted file)
    and compared with the other run over every step; or relaunched traced (a capture)."""

    kind: Literal["rerun"] = "rerun"
    applied_to: str | None = Field(default=None, description="the run the change was applied to")
    compared_with: str | None = None
    policy: str | None = None
    interventions: list[str] = Field(default_factory=list, description="their text forms")
    changed: str | list[str] | None = Field(
        default=None, description="what was changed, in words (one phrase, or one per change)"
    )
    reverted: str | None = None
    files: list[str] = Field(default_factory=list)
    to_rev: str | None = None
    variant: str | None = None
    source_dir: str | None = None
    first_step: int | None = Field(
        default=None, description="first differing step; None: all match"
    )
    common_steps: int | None = None
    gaps: str | None = Field(default=None, description="what one run has and the other lacks")
    match: Json | None = Field(default=None, description="the StepMatch")
    rerun: Json | None = Field(default=None, description="what ran: argv lists, durations")
    out_dir: str | None = None
    error: str | None = None
    trace_dir: str | None = None
    commands: list[list[str]] = Field(default_factory=list)
    capture: Json | None = Field(default=None, description="the capture config of a traced run")
    warnings: list[str] = Field(default_factory=list)
    bisect: BisectData | None = Field(default=None, description="when a bisection probe ran it")


class ManifestData(_Data):
    """State manifests of both runs compared at step boundaries (parameters, optimizer state,
    RNG streams, data cursors)."""

    kind: Literal["manifest"] = "manifest"
    after_step: int | None = Field(default=None, description="the last step whose bits match")
    differences: list[str] = Field(default_factory=list, description="each difference, said")
    diffs: list[Json] = Field(default_factory=list, description="the boundary diffs")
    writes: dict[str, list[Json]] = Field(
        default_factory=dict, description="run name -> the writes that moved a cursor"
    )
    records: dict[str, str] = Field(
        default_factory=dict, description="run name -> the directory its manifests are in"
    )


class NoteData(_Data):
    kind: Literal["note"] = "note"
    changed: str | None = Field(default=None, description="what would have been changed")
    bisect: BisectData | None = Field(default=None, description="a bisection probe not run")


EvidenceData = Annotated[
    StaticData
    | MetricsData
    | TraceCompareData
    | ByteCompareData
    | ReplayData
    | ReproducerData
    | RerunData
    | ManifestData
    | NoteData,
    Field(discriminator="kind"),
]
_ADAPTER: TypeAdapter[Any] = TypeAdapter(EvidenceData)
MODELS: dict[str, type[_Data]] = {
    m.model_fields["kind"].default: m
    for m in (
        StaticData,
        MetricsData,
        TraceCompareData,
        ByteCompareData,
        ReplayData,
        ReproducerData,
        RerunData,
        ManifestData,
        NoteData,
    )
}


def parse_data(kind: str, data: Json) -> _Data:
    """Read one evidence's recorded ``data`` into the model of its kind.

    A key the model does not know, or whose value has another shape than the model says,
    moves to ``extra``: the record is read, never refused and never cut."""
    model = MODELS[kind]
    fields = set(model.model_fields) - {"kind", "extra"}
    known = {k: v for k, v in data.items() if k in fields}
    extra = {k: v for k, v in data.items() if k not in fields}
    while True:
        try:
            return _ADAPTER.validate_python({**known, "kind": kind, "extra": extra})
        except ValidationError as exc:
            bad = {str(e["loc"][1]) for e in exc.errors() if len(e["loc"]) > 1} & set(known)
            if not bad:
                raise
            for k in bad:
                extra[k] = known.pop(k)


def dump_data(d: _Data) -> Json:
    """The dict form of ``d`` as it was recorded: its fields that were set, then ``extra``."""
    own = d.model_dump(mode="json", exclude={"kind", "extra"}, exclude_unset=True)
    return {**own, **d.extra}


def as_model(kind: str, data: _Data | Json) -> _Data:
    """A writer's ``data`` as the model of ``kind``. A dict (a writer that does not build its
    model) is read as a recorded one is, unknown keys into ``extra``; a model of another kind
    is refused, so evidence never carries data that its kind does not describe."""
    if isinstance(data, dict):
        return parse_data(kind, data)
    if isinstance(data, _Data) and data.kind != kind:
        raise ValueError(f"{type(data).__name__} is data of {data.kind} evidence, not {kind}")
    return data

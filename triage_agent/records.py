"""The core records of the evidence ledger (pydantic v2). Everything that crosses a boundary.

Case, RunSpec, Finding, Hypothesis, Evidence, Provenance and Verdict are written to
`.triage/ledger.jsonl` as events and read back by folding those events (see ledger.py).

With ``errors`` and ``paths`` this is the bottom layer: it imports nothing of the project,
so ``probes`` and ``reproducers`` can rest on it alone.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_serializer,
    field_validator,
)

from .evidence_data import EvidenceData, as_model, dump_data


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Category(StrEnum):
    """What a probe looks for, and so what its findings and their hypotheses are about."""

    optimizer_init = "optimizer-init"
    casts = "casts"
    accumulation = "accumulation"
    collectives = "collectives"
    rng_state = "rng-state"
    nondeterminism = "nondeterminism"


class HypothesisStatus(StrEnum):
    open = "open"
    supported = "supported"
    refuted = "refuted"
    inconclusive = "inconclusive"


class Classification(StrEnum):
    bug = "bug"
    policy_difference = "policy-difference"
    environment = "environment"
    unknown = "unknown"


class EvidenceKind(StrEnum):
    static = "static"
    reproducer = "reproducer"
    trace_compare = "trace-compare"
    byte_compare = "byte-compare"
    replay = "replay"
    metrics = "metrics"
    manifest = "manifest"
    rerun = "rerun"
    note = "note"


class EvidenceResult(StrEnum):
    """What one piece of evidence says about the hypotheses it names."""

    supported = "supported"
    refuted = "refuted"
    inconclusive = "inconclusive"
    error = "error"
    observed = "observed"  # a measurement that supports nothing by itself (a trace diff, a rerun)
    # the test ran but does not act on the job (a policy that moved no bit of either run):
    # it neither supports nor refutes the hypotheses it names
    not_applicable = "not-applicable"


EXECUTION_KINDS = frozenset(
    {
        EvidenceKind.reproducer,
        EvidenceKind.trace_compare,
        EvidenceKind.byte_compare,
        EvidenceKind.replay,
        EvidenceKind.manifest,
        EvidenceKind.rerun,
    }
)


class SourceSpec(Record):
    repo: str = Field(description="path to a git repository (or a plain source directory)")
    rev: str | None = Field(default=None, description="git revision; None means the work tree")
    subdir: str | None = Field(default=None, description="part of the repository to scan")
    package: str | None = Field(
        default=None,
        description="an importable package the run takes from this repository at rev: every "
        "launch puts a throwaway worktree of rev first on PYTHONPATH (nothing is installed)",
    )


class RunSpec(Record):
    name: str
    metrics: str | None = Field(default=None, description="metric fingerprint file or directory")
    trace_dir: str | None = None
    launch: list[list[str]] = Field(
        default_factory=list,
        description=(
            "argv lists run in order to (re)produce this run; never a shell string. "
            "'{out}' in an argument is replaced by a fresh output directory per relaunch, "
            "'{python}' by the interpreter running triage, '{bin}' by its bin directory"
        ),
    )
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    source: SourceSpec | None = None


class Case(Record):
    name: str = "case"
    description: str = ""
    run_a: RunSpec
    run_b: RunSpec
    mismatch_step: int | None = Field(default=None, ge=0)
    workspace: str = ".triage"
    source_roots: list[str] = Field(default_factory=list)
    scan_paths: list[str] = Field(default_factory=list)
    exclude_globs: list[str] = Field(
        default_factory=list,
        description="globs excluded from scans, on top of tests and vendored code",
    )
    correspondence_map: str | None = None
    gradient_accumulation_steps: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(default=600.0, gt=0, le=7 * 24 * 3600)


class ReproducerSpec(Record):
    template: str
    params: dict[str, Any] = Field(default_factory=dict)


class Finding(Record):
    id: str = Field(default_factory=lambda: new_id("F"))
    probe_id: str
    category: Category
    file: str
    line_start: int
    line_end: int
    function: str | None = None
    snippet: str = ""
    rationale: str = ""
    severity: Literal["low", "medium", "high"] = "medium"
    score: float = 0.0
    reproducer: ReproducerSpec | None = None


class Hypothesis(Record):
    id: str = Field(default_factory=lambda: new_id("H"))
    statement: str
    category: Category | str = Field(
        description="a probe category, or a kind no probe covers (a changed source file, an "
        "origin of unknown kind, an environment difference) named as a word"
    )
    rationale: str = Field(default="", description="why this would change the bits")
    findings: list[str] = Field(default_factory=list)
    status: HypothesisStatus = HypothesisStatus.open
    classification: Classification = Classification.unknown
    reproducer: ReproducerSpec | None = None
    status_reason: str = Field(
        default="",
        description="why the status was set against evidence that says otherwise (required "
        "then, and recorded)",
    )
    created: str = Field(default_factory=utcnow)

    @field_validator("category", mode="before")
    @classmethod
    def _known_category(cls, v: Any) -> Any:
        # a plain string naming a probe category becomes the enum member; any other word is
        # kept as given (old ledgers and assistants name their own)
        return Category(v) if isinstance(v, str) and v in Category._value2member_map_ else v


class Provenance(Record):
    python: str
    platform: str
    hostname: str
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    deepspeed: str | None = None
    gpu: str | None = None
    git: dict[str, dict[str, Any]] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)


class Artifact(Record):
    path: str
    sha256: str
    bytes: int
    role: str = ""


class Evidence(Record):
    id: str = Field(default_factory=lambda: new_id("E"))
    hypotheses: list[str] = Field(default_factory=list)
    kind: EvidenceKind
    result: EvidenceResult
    summary: str
    argv: list[str] | None = None
    provenance: Provenance | None = None
    # Typed by kind (evidence_data.py); stored and shown as the plain object it always was,
    # so ledgers, MCP outputs and their published schema keep their shape.
    data: Annotated[
        EvidenceData, WithJsonSchema({"type": "object", "additionalProperties": True})
    ] = Field(default_factory=dict, validate_default=True)
    artifacts: list[Artifact] = Field(default_factory=list)
    duration_s: float | None = None
    created: str = Field(default_factory=utcnow)

    @field_validator("data", mode="before")
    @classmethod
    def _data_of_kind(cls, v: Any, info: ValidationInfo) -> Any:
        kind = info.data.get("kind")
        return as_model(kind, v) if kind is not None else v

    @field_serializer("data")
    def _data_as_recorded(self, d: Any) -> dict[str, Any]:
        return dump_data(d)

    def data_as(self, model: type[D]) -> D:
        """This evidence's data as ``model``; a TypeError when it is evidence of another kind."""
        if not isinstance(self.data, model):
            raise TypeError(
                f"evidence {self.id} is {self.kind.value} evidence, not {model.__name__}"
            )
        return self.data


D = TypeVar("D", bound=BaseModel)


class Verdict(Record):
    hypothesis: str | None = None
    classification: Classification
    statement: str
    location: str | None = Field(default=None, description="file:line and/or trace event")
    evidence: list[str] = Field(default_factory=list, description="the evidence chain, in order")
    next_action: str = ""
    caveats: list[str] = Field(
        default_factory=list,
        description="what a reader must know beside the statement (a run that exited "
        "abnormally after its last step): every caveat the ledger holds, added when recorded",
    )
    created: str = Field(default_factory=utcnow)

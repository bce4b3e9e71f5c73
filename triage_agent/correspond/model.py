"""Records of a cross-framework comparison (pydantic, JSON on disk)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..manifest import TensorEntry

SIDE_VERSION = 1
BOUNDARIES = ("outputs", "grads", "moments", "counters", "master_weights")
"""In the order a step produces them: the forward's outputs, the gradients the optimizer
consumes, the Adam moments and step counters it writes, the fp32 master weights it writes."""

Boundary = Literal["outputs", "grads", "moments", "counters", "master_weights"]


class TensorSite(BaseModel):
    """Where one logical tensor of one side lives in its framework's storage."""

    name: str = Field(description="the parameter's name in the side's own module tree")
    shape: list[int]
    dtype: str = Field(description="dtype of the model (low-precision) parameter")
    master: str = Field(description="the fp32 master storage, e.g. a flat partition slice")
    grad: str = Field(description="where the optimizer-consumed gradient is read from")
    group: int = Field(description="index of the optimizer parameter group holding it")


class SideMeta(BaseModel):
    """What a capture directory holds (``side.json``)."""

    version: int = Field(ge=1, le=SIDE_VERSION)
    framework: Literal["megatron", "deepspeed", "torch"]
    versions: dict[str, str | None] = Field(default_factory=dict)
    optimizer: str = Field(description="the class that really ran the update")
    wrapper: str = Field(description="the framework optimizer around it")
    sites: list[TensorSite]
    outputs: list[str] = Field(description="output names captured per step")
    steps: int = 0
    clip: float | None = Field(
        default=None,
        description="the gradient-norm clip the framework applies (0: none; None: not read)",
    )
    resolution_check: str = Field(
        default="",
        description="how the resolved storage was checked against the framework's own reader",
    )
    settings: dict[int, dict[str, dict[str, str]]] = Field(
        default_factory=dict,
        description="step -> parameter name -> optimizer setting -> exact repr, as the "
        "optimizer held it when it ran that step",
    )


class Pair(BaseModel):
    a: str
    b: str
    shape: list[int]
    evidence: list[str] = Field(description="why these two are the same tensor")
    a_site: TensorSite
    b_site: TensorSite


class Unmapped(BaseModel):
    side: Literal["a", "b"]
    name: str
    shape: list[int]
    reason: str


class Mapping(BaseModel):
    """The reviewable correspondence: every pair with its evidence, every tensor left over."""

    version: int = 1
    a_framework: str
    b_framework: str
    normalisation: list[str] = Field(description="the name rules applied before matching")
    pairs: list[Pair]
    unmapped: list[Unmapped]
    outputs: list[str] = Field(description="outputs both sides captured, matched by name")


class TensorDiff(BaseModel):
    name: str = Field(description="A's name of the tensor (or the output's)")
    elements: int
    differing: int
    max_ulp: int | None = Field(default=None, description="largest ULP distance, floats")
    a: TensorEntry
    b: TensorEntry


class BoundaryResult(BaseModel):
    step: int
    boundary: Boundary
    compared: int
    differing: list[TensorDiff] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list, description="tensors one side lacks")

    @property
    def matches(self) -> bool:
        return not self.differing and not self.missing and self.compared > 0


class Policy(BaseModel):
    """What the evidence at the first differing boundary says differs."""

    name: str = Field(description="short label, e.g. 'weight_decay per tensor'")
    kind: Literal["setting", "gradient-scale", "arithmetic", "forward"] = Field(
        default="arithmetic", description="what sort of evidence named it"
    )
    setting: str | None = Field(
        default=None, description="the optimizer setting held differently, for kind 'setting'"
    )
    detail: str
    tensors: list[str] = Field(default_factory=list, description="A's names it applies to")
    explains_all: bool = Field(description="it covers every differing tensor of the boundary")


class TableRow(BaseModel):
    boundary: Boundary
    verdict: Literal["match", "differs", "not captured"]
    first_step: int | None = None
    steps_compared: int = 0
    policy: str | None = None
    detail: str = ""


class CompatTable(BaseModel):
    a: str
    b: str
    steps: int
    rows: list[TableRow]
    first: BoundaryResult | None = Field(default=None, description="the first differing one")
    policy: Policy | None = None
    unmapped: int = 0
    pairs: int = 0
    intervention: str | None = Field(default=None, description="applied to B, if any")


# -- the alignment loop: one intervention on B per differing boundary ------------------------
class Candidate(BaseModel):
    """One intervention on B drawn from B's own configuration surface."""

    intervention: str = Field(description="its text form (interventions.parse_intervention)")
    source: Literal["config-key", "launch-flag", "replace"]
    governs: str = Field(description="the policy it governs, as the catalogue or flag says")
    why: str = Field(description="where it was found")
    relevant: bool = Field(description="what it governs matches the diagnosed policy")


class Attempt(BaseModel):
    candidate: Candidate
    outcome: Literal["aligned", "still differs", "earlier boundary differs", "failed", "refused"]
    first_after: str | None = Field(
        default=None, description="the first differing (step, boundary) with it, if any"
    )
    detail: str = ""
    seconds: float = 0.0
    evidence_id: str | None = None


class AlignStep(BaseModel):
    """One differing boundary, what the evidence named there, and what was tried on B."""

    step: int
    boundary: Boundary
    policy: Policy | None
    hypothesis_id: str | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    proven_by: str | None = Field(default=None, description="the aligning intervention")
    unproven_why: str = ""


class AlignRow(BaseModel):
    """A boundary of the compatibility table: as launched, why, and with the alignments."""

    boundary: Boundary
    launched: Literal["match", "differs", "not captured"]
    first_step: int | None = None
    policy: str | None = None
    proven_by: str | None = Field(default=None, description="intervention that aligned it")
    aligned: Literal["match", "differs", "not captured"] = Field(
        description="the verdict with every proven intervention applied to B"
    )
    note: str = ""


class Alignment(BaseModel):
    """The compatibility table of one cell, written by the loop: per boundary match or
    differs, and by which policy, each policy proven by one intervention on B or left
    unproven."""

    a: str
    b: str
    steps: int
    pairs: int
    unmapped: int
    given: list[str] = Field(default_factory=list, description="interventions the user gave")
    kept: list[str] = Field(default_factory=list, description="proven interventions, in order")
    rows: list[AlignRow]
    walk: list[AlignStep]
    launched: CompatTable = Field(description="the comparison as launched (with the given)")
    aligned: CompatTable = Field(description="the comparison with every kept intervention")
    reruns: int = 0
    seconds: float = 0.0
    stopped: str = Field(default="", description="why the loop ended")

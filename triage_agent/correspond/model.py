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
    framework: Literal["megatron", "deepspeed"]
    versions: dict[str, str | None] = Field(default_factory=dict)
    optimizer: str = Field(description="the class that really ran the update")
    wrapper: str = Field(description="the framework optimizer around it")
    sites: list[TensorSite]
    outputs: list[str] = Field(description="output names captured per step")
    steps: int = 0
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

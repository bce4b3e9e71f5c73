"""Typed parameters of every reproducer template, and the one JSON line each template prints.

A template is named by ``TemplateInfo.name``; its parameters are a pydantic model with
``extra="forbid"`` (an unknown parameter is an error naming it, never silently ignored) and a
default for every field, so ``ReproducerSpec(template=NAME)`` with no params is always valid.

The hypothesis direction is the same for every template: ``supported: true`` means "the
site this template models causes a bitwise difference"; ``false`` means the template looked
and the bytes agreed; ``null`` means it could not decide (the notes say why). The exact
meaning per template is in ``TemplateInfo.supported_means``.

This module imports neither torch nor DeepSpeed: the CLI, the MCP server and the launcher
use it to validate without paying for those imports.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator

from triage_agent.errors import InputError

OUTPUT_SCHEMA = "triage.reproducer/1"


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OptimizerInitParams(Params):
    zero_stage: int = Field(default=1, ge=0, le=3, description="DeepSpeed ZeRO stage")
    dtype: Literal["bf16", "fp32"] = Field(default="bf16", description="model (low) precision")
    optimizer: str = Field(
        default="AdamW",
        pattern=r"^[A-Za-z][A-Za-z0-9_]{0,40}$",
        description="optimizer type as written in the DeepSpeed config (Adam, AdamW)",
    )


class CastRoundtripParams(Params):
    low_dtype: Literal["bfloat16", "float16"] = Field(
        default="bfloat16",
        description="the dtype reduced values are rounded to before accumulating",
    )
    n: int = Field(default=4096, ge=1, le=1 << 26, description="number of values")


class ReductionOrderParams(Params):
    world_size: int = Field(default=2, ge=2, le=64, description="ranks in the all_reduce")
    backend: Literal["gloo", "nccl"] = Field(
        default="gloo", description="gloo on CPU, nccl on CUDA"
    )
    dtype: Literal["float32", "float64", "bfloat16", "float16"] = Field(default="float32")


class OpRepeatabilityParams(Params):
    op: str = Field(
        default="index_add_",
        description="op with a synthetic-input builder (see `triage reproduce list`)",
    )
    device: Literal["cpu", "cuda"] = "cpu"
    repeats: int = Field(default=5, ge=2, le=1000)
    deterministic: bool = Field(
        default=False,
        description="torch.use_deterministic_algorithms(True) and CUBLAS_WORKSPACE_CONFIG=:4096:8",
        json_schema_extra={"setting": "torch.deterministic_algorithms"},
    )

    @field_validator("op")
    @classmethod
    def _canonical_op(cls, v: str) -> str:
        # Findings and traces spell ops several ways: aten::index_add_.default, index_add.
        name = v.removeprefix("aten::").split(".")[0]
        if name not in REPEATABILITY_OPS and f"{name}_" in REPEATABILITY_OPS:
            name = f"{name}_"
        return name


class RngResumeParams(Params):
    zero_stage: int = Field(default=1, ge=0, le=3, description="DeepSpeed ZeRO stage")


class AsyncLifetimeParams(Params):
    device: Literal["cuda"] = "cuda"


class EmptyContributionParams(Params):
    world_size: int = Field(default=2, ge=2, le=16)
    function: str = Field(
        default="deepspeed.runtime.utils.get_global_norm_of_tensors",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$",
        description="dotted path of a norm or clip function taking a list of tensors",
    )


class RngAdvanceParams(Params):
    function: str = Field(
        default="random:random",
        pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$",
        description="the function to call, as pkg.mod:qualname (a module-level function, "
        "a class, or Class.staticmethod)",
    )
    args: list[JsonValue] = Field(
        default_factory=list, max_length=32, description="positional arguments (JSON values)"
    )
    kwargs: dict[str, JsonValue] = Field(
        default_factory=dict, max_length=32, description="keyword arguments (JSON values)"
    )
    calls: int = Field(default=1, ge=1, le=1000, description="how many times it is called")
    seed: int = Field(
        default=0, ge=0, le=2**32 - 1, description="every generator is seeded with it first"
    )
    paths: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="directories put first on sys.path to import the function; empty: the "
        "case's run directories and source roots (filled in when it is generated)",
        json_schema_extra={"paths": True},
    )


# Ops the op_repeatability template can build synthetic inputs for (kept here, without
# torch, so that an unknown op is rejected before anything is launched).
REPEATABILITY_OPS = (
    "index_add_",
    "scatter_add_",
    "index_put_",
    "matmul",
    "bmm",
    "sum",
    "cumsum",
    "embedding_backward",
)


class TemplateInfo(BaseModel):
    """What one template tests, how it runs, and what its verdict means."""

    name: str
    params_model: type[Params] = Field(exclude=True)
    tests: str
    supported_means: str
    needs_gpu: Literal["never", "param", "always"] = "never"
    uses_deepspeed: bool = False
    ranks: int = Field(
        default=1, description="ranks the template starts itself (not launcher ranks)"
    )
    default_timeout_s: float = 300.0

    def params_schema(self) -> dict[str, Any]:
        return self.params_model.model_json_schema()


TEMPLATES: dict[str, TemplateInfo] = {
    t.name: t
    for t in (
        TemplateInfo(
            name="optimizer_init",
            params_model=OptimizerInitParams,
            tests="a real DeepSpeed engine's optimizer path leaves weights, moments and step "
            "counters untouched before the first step, and its first update equals torch's",
            supported_means="some state changed before the first real step, or the first update "
            "equals a reference that assumes an already-advanced step counter",
            uses_deepspeed=True,
        ),
        TemplateInfo(
            name="cast_roundtrip",
            params_model=CastRoundtripParams,
            tests="fp32 accumulation of reduced values vs rounding them to a low dtype first",
            supported_means="accumulating after the low-dtype round trip gives different fp32 bytes",
        ),
        TemplateInfo(
            name="reduction_order",
            params_model=ReductionOrderParams,
            tests="all_reduce(SUM) vs a fixed-order local sum of the same per-rank tensors",
            supported_means="the collective's bytes differ from the fixed-order sum, or differ "
            "between ranks",
            needs_gpu="param",
            ranks=2,
        ),
        TemplateInfo(
            name="op_repeatability",
            params_model=OpRepeatabilityParams,
            tests="one op run N times on identical inputs, output bytes compared",
            supported_means="two runs of the op on identical inputs gave different bytes",
            needs_gpu="param",
        ),
        TemplateInfo(
            name="rng_resume",
            params_model=RngResumeParams,
            tests="a DeepSpeed checkpoint loaded in a fresh process restores every RNG stream "
            "and the data cursor",
            supported_means="some RNG stream or the data cursor differs from its value at save time",
            uses_deepspeed=True,
        ),
        TemplateInfo(
            name="async_lifetime",
            params_model=AsyncLifetimeParams,
            tests="a buffer used asynchronously on another stream (or by an async collective) "
            "is reused before wait() / without record_stream",
            supported_means="the unsafe pattern produced wrong bytes while the safe one did not",
            needs_gpu="always",
        ),
        TemplateInfo(
            name="rng_advance",
            params_model=RngAdvanceParams,
            tests="a named function of the case called with the given arguments; the state of "
            "each process-global generator (torch CPU, each CUDA device, numpy, python random) "
            "compared before and after the calls",
            supported_means="calling the function changed at least one global generator's "
            "state (the details say which, advanced yes/no for each): it draws from, or "
            "reseeds, a stream the training step may draw from",
            default_timeout_s=120.0,
        ),
        TemplateInfo(
            name="empty_contribution",
            params_model=EmptyContributionParams,
            tests="a norm/clip function called with an empty list on one rank while the others "
            "have tensors, against the same call with zero tensors on that rank",
            supported_means="the empty call crashed, hung, or returned bytes different from the "
            "zero-contribution control on some rank",
            uses_deepspeed=True,
            ranks=2,
        ),
    )
}


def template_info(name: str) -> TemplateInfo:
    info = TEMPLATES.get(name)
    if info is None:
        raise InputError(f"unknown reproducer template {name!r}; known: {', '.join(TEMPLATES)}")
    return info


def validate_params(template: str, params: dict[str, Any] | None) -> Params:
    """Validate ``params`` for ``template``; one-line InputError naming the bad field."""
    info = template_info(template)
    if params is not None and not isinstance(params, dict):
        raise InputError(
            f"parameters of {template} must be a JSON object, got {type(params).__name__}"
        )
    try:
        model = info.params_model.model_validate(params or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(params)"
        known = ", ".join(info.params_model.model_fields)
        raise InputError(
            f"invalid parameter {loc!r} for template {template}: {first['msg']} (parameters: {known})"
        ) from None
    if isinstance(model, OpRepeatabilityParams) and model.op not in REPEATABILITY_OPS:
        raise InputError(
            f"op_repeatability has no input builder for op {model.op!r}; known: "
            f"{', '.join(REPEATABILITY_OPS)} (replay captured inputs with reproducers.replay)"
        )
    return model


def needs_gpu(template: str, params: Params) -> bool:
    info = template_info(template)
    if info.needs_gpu == "always":
        return True
    if info.needs_gpu == "param":
        return (
            getattr(params, "device", None) == "cuda" or getattr(params, "backend", None) == "nccl"
        )
    return False


class ReproducerOutput(BaseModel):
    """The single JSON line a template prints on stdout (the launcher validates it)."""

    # strict: "yes" or 1 must never pass for supported=true
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    schema_: Literal["triage.reproducer/1"] = Field(default=OUTPUT_SCHEMA, alias="schema")
    template: str
    status: Literal["ok", "skipped", "error"] = Field(
        description="ok: it ran and decided (or could not); skipped: not runnable here "
        "(no CUDA); error: the reproducer itself failed"
    )
    supported: bool | None = None
    compared: str = Field(description="what was compared with what")
    digests: dict[str, Any] = Field(default_factory=dict, description="sha256 of raw bytes etc.")
    details: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)


def path_fields(params: type[Params]) -> list[str]:
    """The parameters of a template that hold directories the reproducer imports from: an
    adapter checks them against the roots it may touch, the generator resolves them."""
    return [
        name
        for name, field in params.model_fields.items()
        if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("paths")
    ]


def setting_knobs(params: type[Params]) -> dict[str, str]:
    """The parameters of a template that stand for a process-wide setting (the name a run's
    state manifest records it by): a proven setting is read through a reproducer by running
    it again at the other run's value."""
    out = {}
    for name, field in params.model_fields.items():
        extra = field.json_schema_extra
        if isinstance(extra, dict) and isinstance(extra.get("setting"), str):
            out[name] = extra["setting"]
    return out

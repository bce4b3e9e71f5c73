"""Capture settings: one validated record, passed in (never read from the environment at import).

The injected ``sitecustomize`` reads it from the JSON file named by ``TRIAGE_CAPTURE_CONFIG``;
in-process users build it directly. Levels are cumulative, narrowest cost first:

* ``none``: no tracing at all; the injection only applies ``policies`` (a policy relaunch).
* ``sentinel``: what crosses rank boundaries (each collective's input and output buffers)
  and what the optimizer wrote (each parameter it holds after its step, over the flat
  partition where the framework keeps one): the always-on recorder's level.
* ``collective``: collectives (torch.distributed, hence deepspeed.comm) and optimizer state
  (every parameter's gradient and state before and after the step).
* ``module``: plus every module's forward outputs and output gradients.
* ``op``: plus every ATen op (TorchDispatchMode) inside the ``scope`` regex.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .. import policies as _policies
from ..errors import InputError
from ..trace_format import INIT_STEP

Level = Literal["none", "sentinel", "collective", "module", "op"]
# here, not in .digest, so reading a capture config (the injected bootstrap) needs no torch
DigestMode = Literal["xor", "order", "both"]
LEVELS: tuple[Level, ...] = ("none", "sentinel", "collective", "module", "op")
CONFIG_ENV = "TRIAGE_CAPTURE_CONFIG"
# Far above any real world size; a bound so that a typo like 0-1000000000 is an error, not
# a billion-element set built before the run starts.
MAX_RANKS = 65536


class CaptureConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    out_dir: Path = Field(description="directory for trace_rank*.jsonl, dumps and status files")
    steps: tuple[int, int] | None = Field(
        default=None,
        description=(
            "inclusive step window; None traces every step. -1 is the init phase (every "
            "event before the first step), traced also by any window that starts at 0"
        ),
    )
    level: Level = "module"
    scope: str | None = Field(default=None, description="regex over module scopes (op/module)")
    ranks: list[int] | None = Field(default=None, description="ranks to trace; None = all")
    dump: list[str] = Field(
        default_factory=list,
        description="fnmatch patterns over 'name' or 'scope:name' whose tensors are saved whole",
    )
    digest: DigestMode = "xor"
    order_names: list[str] = Field(
        default_factory=lambda: [
            "*sort*",
            "*topk*",
            "*argmax*",
            "*index*",
            "*scatter*",
            "*gather*",
        ],
        description="fnmatch patterns of events that get the order digest even in xor mode",
    )
    run_id: str = "run"
    policies: list[str] = Field(default_factory=list)
    step_function: str | None = Field(
        default=None,
        description=(
            "'pkg.mod:qualname' of the job's training-step function (or '__main__:name' for "
            "one in the script): each call begins a step; by default steps come from the "
            "job's MetricLog.log calls, else from its optimizer or DeepSpeed engine"
        ),
    )

    @field_validator("step_function")
    @classmethod
    def _step_function_named(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", v):
            raise ValueError(f"step_function {v!r} must be 'pkg.mod:qualname'")
        return v

    @field_validator("scope")
    @classmethod
    def _scope_compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"scope is not a valid regex: {exc}") from None
        return v

    @field_validator("policies")
    @classmethod
    def _policies_known(cls, v: list[str]) -> list[str]:
        # checked here so a typo fails before the command is launched, not inside every rank
        try:
            return _policies.check(list(v))
        except InputError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("run_id")
    @classmethod
    def _run_id_plain(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", v):
            raise ValueError("run_id must be 1-100 characters of [A-Za-z0-9_.-]")
        return v

    @model_validator(mode="after")
    def _window_ordered(self) -> CaptureConfig:
        if self.steps is not None and (self.steps[0] < INIT_STEP or self.steps[1] < self.steps[0]):
            raise ValueError(f"step window {self.steps} is empty or starts before init (-1)")
        return self

    def in_window(self, step: int) -> bool:
        if self.steps is None:
            return True
        if step == INIT_STEP:
            # what runs before step 0 is where step 0's inputs come from
            return self.steps[0] <= 0
        return self.steps[0] <= step <= self.steps[1]

    def traces_rank(self, rank: int) -> bool:
        return self.ranks is None or rank in self.ranks


def parse_steps(spec: str | None) -> tuple[int, int] | None:
    """'37' -> (37, 37); '36-37' -> (36, 37); 'init' -> (-1, -1); 'init-3' -> (-1, 3)."""
    if spec is None or spec == "":
        return None
    m = re.fullmatch(r"\s*(\d+|init)\s*(?:-\s*(\d+)\s*)?", spec)
    if not m:
        raise InputError(
            f"invalid step range {spec!r}: expected N, A-B or init-B (e.g. 36-37, init-2)"
        )
    a = INIT_STEP if m.group(1) == "init" else int(m.group(1))
    b = int(m.group(2)) if m.group(2) else a
    if b < a:
        raise InputError(f"invalid step range {spec!r}: the end comes before the start")
    return a, b


def parse_ranks(spec: str | None) -> list[int] | None:
    """'0,1' -> [0, 1]; '0-3' -> [0, 1, 2, 3]; None -> None (all ranks). Ranks < MAX_RANKS."""
    if spec is None or spec == "":
        return None
    out: set[int] = set()
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise InputError(f"invalid rank list {spec!r}: expected ranks like 0,1 or 0-3")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        if b < a:
            raise InputError(
                f"invalid rank list {spec!r}: in {part.strip()!r} the end comes before the start"
            )
        if b >= MAX_RANKS:
            raise InputError(
                f"invalid rank list {spec!r}: rank {b} is above the limit of {MAX_RANKS - 1}"
            )
        out.update(range(a, b + 1))
    return sorted(out)


def load_config(path: str | Path) -> CaptureConfig:
    p = Path(path)
    try:
        return CaptureConfig.model_validate_json(p.read_text())
    except OSError as exc:
        raise InputError(f"cannot read capture config {p}: {exc.strerror}") from None

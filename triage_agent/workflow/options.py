"""The workflow's bounds (:class:`RunOptions`): what ``triage run`` and the MCP workflow tool
take from their caller, and what the loop and its moves read while they run."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..compare.distributed import Executor


class RunOptions(BaseModel):
    """The workflow's bounds; the CLI and the MCP tool both build their inputs from these."""

    mismatch_step: int | None = Field(
        default=None, ge=0, le=10**9, description="the step you believe first differs"
    )
    budget_minutes: float = Field(
        default=30.0,
        gt=0,
        le=7 * 24 * 60,
        description="no new work starts after this long; checked between launches, not inside one",
    )
    max_hypotheses: int = Field(default=3, ge=1, le=20, description="tested in stage 1")
    confirm_trace: bool = Field(
        default=True,
        description="trace even when stage 1 supported a hypothesis, to check that it is the "
        "first divergence observed",
    )
    timeout_s: float = Field(default=600.0, gt=0, le=7 * 24 * 3600, description="per launch")
    executor: Executor = Field(
        default_factory=Executor,
        description="where the trace comparisons' ranks are compared: local worker processes, "
        "or Ray (a cluster that sees the workspace under the same path); the result is the same",
    )

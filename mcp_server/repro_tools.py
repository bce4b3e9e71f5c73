"""Tools over the reproducers: list the templates; generate a reproducer from a recorded
finding or hypothesis, and launch one by id.

A reproducer is launched only by the id the generator gave it: the file it wrote and the
ledger recorded, never a path or a command from the caller. Its result is execution
evidence; ``update_hypothesis`` cites that evidence to move a hypothesis to supported or
refuted.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from reproducers.params import TEMPLATES

from .security import MAX_NAME_CHARS, Workspace
from .spec import In, Progress


class ListTemplatesIn(In):
    name: str | None = Field(default=None, max_length=MAX_NAME_CHARS, description="one template")


class TemplateOut(BaseModel):
    name: str
    tests: str = Field(description="what the template compares")
    supported_means: str = Field(description="what supported=true means for the hypothesis")
    needs_gpu: str
    uses_deepspeed: bool
    ranks: int
    default_timeout_s: float
    params_schema: dict[str, Any] = Field(description="JSON schema of its parameters")


class TemplatesOut(BaseModel):
    templates: list[TemplateOut]


def list_templates(ws: Workspace, args: ListTemplatesIn, progress: Progress) -> TemplatesOut:
    """List the reproducer templates: what each compares, what a supported result means,
    whether it needs a GPU or DeepSpeed, and the JSON schema of its parameters (for the
    'reproducer' of a hypothesis)."""
    from reproducers.params import template_info

    infos = [template_info(args.name)] if args.name else list(TEMPLATES.values())
    return TemplatesOut(
        templates=[TemplateOut(**t.model_dump(), params_schema=t.params_schema()) for t in infos]
    )

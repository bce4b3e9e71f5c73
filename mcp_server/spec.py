"""What a tool is: input base model, progress sink, honest annotations, the spec record.

Kept apart from the registry so the modules holding tool functions can import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict

from .security import Workspace


class Progress(Protocol):
    """Progress sink handed to long tools: ``progress(done, total, message)``."""

    def __call__(
        self, done: float, total: float | None = None, message: str | None = None
    ) -> None: ...


class In(BaseModel):
    """Base of every tool input: unknown arguments are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


ID_PATTERN = r"^[A-Za-z0-9_.-]+$"

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# Appends to the ledger; the same call twice records twice (two hypotheses, two notes).
APPENDS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
# Appends, but calling it again with the same arguments leaves the same state.
APPENDS_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# Writes files it owns (a report) over their previous version: same input, same output.
WRITES_FILES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# Appends; with an opt-in argument it also relaunches the case's runs (cached).
APPENDS_MAY_RUN = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
# Runs a process (a reproducer, a relaunched training run): its effects reach outside.
RUNS_PROCESS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
# Runs a process and rebuilds a working copy it owns (a one-file revert's variant directory,
# removed and copied again): destructive for that directory, and each call records anew.
RUNS_PROCESS_REBUILDS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
)
# The resumable workflow: runs processes and may rebuild a variant directory it owns, but a
# second call with the same arguments finds its stages done and records nothing new.
RUNS_RESUMABLE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True
)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    input: type[BaseModel]
    output: type[BaseModel]
    annotations: ToolAnnotations
    fn: Callable[[Workspace, Any, Progress], BaseModel]

    @property
    def description(self) -> str:
        return (self.fn.__doc__ or self.title).strip()

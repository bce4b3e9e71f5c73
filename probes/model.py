"""What a probe is: metadata, a tree-sitter query and a predicate over each match.

A probe's query must capture ``@anchor``: the node the finding points at. The predicate
receives a :class:`Match` and returns a :class:`Hit` (possibly adjusted span, extra rationale,
reproducer parameters) or ``None`` to reject the match. Predicates are pure functions of the
parsed file; they never read other files, so a probe sees only what one file says (its call
graph is the file's own, resolved by simple name).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# the one category enum lives on the ground floor, shared with findings and hypotheses
from triage_agent.records import Category as Category

from .unit import Lang, Unit

if TYPE_CHECKING:
    from tree_sitter import Node


Severity = Literal["low", "medium", "high"]


def template_names(directory: Path) -> frozenset[str]:
    """Reproducer templates in ``directory``: one ``<name>.py`` each; ``_`` files are shared code."""
    return frozenset(p.stem for p in directory.glob("*.py") if not p.name.startswith("_"))


def _templates_dir() -> Path:
    # find_spec locates the reproducers package without importing it: probes rest on the
    # bottom layer alone, and the template files are shipped as reproducers' package data
    spec = importlib.util.find_spec("reproducers")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the reproducers package is not installed beside probes")
    return Path(next(iter(spec.submodule_search_locations))) / "templates"


TEMPLATES = template_names(_templates_dir())


@dataclass
class Match:
    """One query match inside one file, handed to a probe's predicate."""

    unit: Unit
    anchor: Node
    caps: dict[str, list[Node]]

    def text(self, name: str) -> str:
        nodes = self.caps.get(name) or []
        return self.unit.text(nodes[0]) if nodes else ""


@dataclass
class Hit:
    """A predicate's acceptance: where the finding lies and what to add to it."""

    line_start: int  # 1-based, inclusive
    line_end: int
    note: str = ""  # appended to the probe's rationale: what this site specifically does
    params: dict[str, Any] = field(default_factory=dict)
    confidence: float = 1.0  # 0..1, scales the score


Predicate = Callable[[Match], "Hit | None"]


class Probe(BaseModel):
    """A probe's metadata plus its query and predicate (the latter not serialised)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: str
    category: Category
    severity: Severity
    title: str
    rationale: str
    template: str | None = Field(description="reproducer template that tests it, or None")
    params: dict[str, Any] = Field(default_factory=dict, description="default template params")
    lang: Lang = "python"
    query: str
    predicate: Predicate | None = Field(default=None, exclude=True)
    references: list[str] = Field(default_factory=list)

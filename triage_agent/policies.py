"""Run policies: one changed setting at a time, applied inside a run's processes by injection.

Placeholder API (filled in by the workflow): ``apply_all(names)`` is called by the injected
``sitecustomize`` before the training script runs.
"""

from __future__ import annotations

from .errors import InputError

POLICIES: dict[str, str] = {}


def apply_all(names: list[str]) -> None:
    for name in names:
        if name not in POLICIES:
            raise InputError(f"unknown policy {name!r}; known: {sorted(POLICIES)}")

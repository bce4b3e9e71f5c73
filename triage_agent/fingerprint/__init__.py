"""Fingerprint capture: bit-pattern digests, per-rank traces, injection into unmodified runs.

Split by responsibility: :mod:`.digest` (pure hashing, staged on the device),
:mod:`.capture` (the tracer: one gate, self-suspending), :mod:`.attribution` (module
scopes), :mod:`.collectives` (which collective arguments are inputs/outputs), :mod:`.sink`
(the per-rank JSONL writer), :mod:`.inject` (``sitecustomize`` for unmodified commands) and
:mod:`.command` (launching a command with the tracer injected).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .capture import Tracer
    from .command import CaptureResult, TraceFileInfo, capture_command
    from .config import CaptureConfig, parse_ranks, parse_steps
    from .digest import digest_many, digest_now

# Imported on first use: the injected bootstrap is inside this package and runs at start-up
# in every process of a launch, and a policy-only relaunch needs neither the tracer nor torch.
_LAZY = {
    "CaptureConfig": ".config",
    "CaptureResult": ".command",
    "TraceFileInfo": ".command",
    "Tracer": ".capture",
    "capture_command": ".command",
    "digest_many": ".digest",
    "digest_now": ".digest",
    "parse_ranks": ".config",
    "parse_steps": ".config",
}
__all__ = [
    "CaptureConfig",
    "CaptureResult",
    "TraceFileInfo",
    "Tracer",
    "capture_command",
    "digest_many",
    "digest_now",
    "parse_ranks",
    "parse_steps",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name], __name__), name)

"""Fingerprint capture: bit-pattern digests, per-rank traces, injection into unmodified runs.

Split by responsibility: :mod:`.digest` (pure hashing, staged on the device),
:mod:`.capture` (the tracer: one gate, self-suspending), :mod:`.attribution` (module
scopes), :mod:`.collectives` (which collective arguments are inputs/outputs), :mod:`.sink`
(the per-rank JSONL writer), :mod:`.inject` (``sitecustomize`` for unmodified commands) and
:mod:`.command` (launching a command with the tracer injected).
"""

from .capture import Tracer
from .command import CaptureResult, TraceFileInfo, capture_command
from .config import CaptureConfig, parse_ranks, parse_steps
from .digest import digest_many, digest_now

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

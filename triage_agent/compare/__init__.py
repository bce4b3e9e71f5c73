"""Offline comparison of two traced runs: alignment, first divergence, byte confirmation.

Library API (the workflow, the MCP server and the CLI call these):
``load_run`` (``load_runs`` for two at once), ``compare_runs``, ``confirm_bytes``, ``export_perfetto``, ``to_markdown``,
``headline`` (one paragraph: what differs first, its role and call site).
Nothing here imports torch, except ``confirm_bytes`` loading ``.pt`` dumps lazily.
"""

from .bytes import ByteReport, confirm_bytes
from .engine import compare_runs
from .export import export_perfetto, headline, to_markdown
from .importers import load_pair, load_run, load_runs
from .mapping import Mapping, load_mapping
from .model import TraceRun
from .result import CompareResult

__all__ = [
    "ByteReport",
    "CompareResult",
    "Mapping",
    "TraceRun",
    "compare_runs",
    "confirm_bytes",
    "export_perfetto",
    "headline",
    "load_mapping",
    "load_pair",
    "load_run",
    "load_runs",
    "to_markdown",
]

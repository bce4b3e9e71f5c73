"""The headless two-stage workflow behind `triage run` (and the MCP tools that mirror it).

characterize -> stage 1 (bounded scan, hypotheses, reproducers) -> stage 2 (trace, compare,
replay) -> fix validation (one policy, uninstrumented rerun) -> verdict. Every step writes to
the ledger as it happens; a second `triage run` resumes from what the ledger holds.
"""

from .characterize import MismatchReport, characterize, confirm_mismatch

__all__ = ["MismatchReport", "characterize", "confirm_mismatch"]

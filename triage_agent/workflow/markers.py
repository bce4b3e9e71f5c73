"""Stage markers: what a finished stage was computed for, so a resume reuses only its own.

A stage's work depends on the first mismatching step (the scan's phase, the trace window,
the verdict's statement): a marker records that step, and a later run whose step differs
(other baselines, other metrics, another given step) redoes the stage instead of reusing
a scan or a window chosen for another step.
"""

from __future__ import annotations

from typing import Any

from ..ledger import Ledger, LedgerState


def done_for(state: LedgerState, stage: str, step: int | None) -> dict[str, Any] | None:
    """The latest finished marker of ``stage`` recorded for ``step``, if any."""
    for mark in reversed(state.stages):
        if mark.get("stage") == stage and mark.get("status") == "done":
            return mark if mark.get("step") == step else None
    return None


def unchanged_since_verdict(ledger: Ledger) -> bool:
    """Nothing that could change a verdict was appended after the last one.

    Judged by the order of events in the log, not by timestamps: evidence recorded again
    after an interruption keeps its first ``created`` time although it is new to the log.
    """
    events, _torn = ledger.read_events()
    last = next((i for i in range(len(events) - 1, -1, -1) if events[i].kind == "verdict"), None)
    if last is None:
        return False
    return not any(e.kind in ("evidence", "hypothesis", "finding") for e in events[last + 1 :])

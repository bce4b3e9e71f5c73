"""Scoring findings by relevance to the phase in which the runs first disagree.

score = severity x phase weight of the category x the predicate's confidence x locality,
where locality rewards findings on changed lines (diff scans) and near the given FILE:LINE
locations. The weights are a starting policy, visible here so a reviewer can argue with them.
"""

from __future__ import annotations

from typing import Literal

from .model import Category

Phase = Literal["first-step", "resume", "gas-boundary", "multi-rank", "update"]

SEVERITY = {"high": 1.0, "medium": 0.7, "low": 0.4}

C = Category
PHASE_WEIGHTS: dict[str | None, dict[Category, float]] = {
    "first-step": {
        C.optimizer_init: 1.0,
        C.nondeterminism: 0.9,
        C.casts: 0.5,
        C.accumulation: 0.4,
        C.collectives: 0.4,
        C.rng_state: 0.3,
    },
    "resume": {
        C.rng_state: 1.0,
        C.optimizer_init: 0.5,
        C.nondeterminism: 0.3,
        C.casts: 0.2,
        C.accumulation: 0.2,
        C.collectives: 0.2,
    },
    "gas-boundary": {
        C.accumulation: 1.0,
        C.casts: 0.7,
        C.collectives: 0.6,
        C.nondeterminism: 0.4,
        C.optimizer_init: 0.2,
        C.rng_state: 0.2,
    },
    "multi-rank": {
        C.collectives: 1.0,
        C.accumulation: 0.7,
        C.casts: 0.6,
        C.nondeterminism: 0.5,
        C.optimizer_init: 0.2,
        C.rng_state: 0.2,
    },
    "update": {c: 0.6 for c in Category},
    None: {c: 0.6 for c in Category},
}


def locality(
    line_start: int,
    line_end: int,
    changed: list[tuple[int, int]] | None,
    windows: list[tuple[int, int, int]],
    phase: str | None,
) -> float:
    """1.0 on a changed line or at a location; lower with distance; 1.0 when unbounded."""
    if changed is not None:
        on_change = any(a <= line_end and line_start <= b for a, b in changed)
        if on_change:
            return 1.0
        return 0.5 if phase == "update" else 0.7
    if windows:
        best = 0.0
        for a, b, centre in windows:
            if line_start <= b and a <= line_end:
                dist = (
                    0
                    if line_start <= centre <= line_end
                    else min(abs(line_start - centre), abs(line_end - centre))
                )
                half = max(1, (b - a) // 2)
                best = max(best, 1.0 - 0.5 * min(1.0, dist / half))
        return best
    return 1.0


def score(
    severity: str, category: Category, confidence: float, phase: str | None, loc: float
) -> float:
    return round(SEVERITY[severity] * PHASE_WEIGHTS[phase][category] * confidence * loc, 4)

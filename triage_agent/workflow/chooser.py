"""The chooser: from every move the proposers offer, the one to make next.

Moves are ranked by separation per second (a move's gain over its expected cost). Two rules
keep the ranking honest about what the evidence says:

- once a hypothesis is proven (its intervention made every step match), only moves that read
  it further are left (and the trace such a reading needs): a second proof would not change
  what the runs showed;
- a test no observation points at (an unguided one: a declared setting, which is usually the
  premise of the comparison; a restore that nothing observed asks for) waits until every
  observation that could point elsewhere is made.

Each choice is written to the ledger with the alternatives and why, so a reviewer can follow
the reasoning, and :func:`suggestions` gives an assistant the same ranked list.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from .moves import Move
from .proposers import propose
from .situation import Situation

ALTERNATIVES = 4


class Suggestion(BaseModel):
    """One ranked proposal as an assistant or a reviewer reads it."""

    rank: int
    move: str = Field(description="the move in one line")
    kind: str = Field(description="observe, test or read")
    intervention: str | None = Field(default=None, description="for a test: its text form")
    run: str | None = Field(default=None, description="for a test: a, b or both")
    hypothesis: str | None = None
    value: float = Field(description="gain per expected second: what the ranking sorts by")
    cost_s: float
    gain: float
    guided: bool
    why: str
    evidence: list[str] = Field(default_factory=list)
    waits: str | None = Field(default=None, description="why it is not made yet, if it waits")


def rank(moves: list[Move], proven: bool) -> tuple[list[Move], list[tuple[Move, str]]]:
    """(the moves in the order they would be made, the moves held back and why)."""
    held: list[tuple[Move, str]] = []
    if proven:
        held += [(m, "a hypothesis is proven") for m in moves if not _reads(m)]
        moves = [m for m in moves if _reads(m)]
    if any(m.kind == "observe" and m.guided for m in moves):
        held += [
            (m, "waits for the observations still to make")
            for m in moves
            if m.kind == "test" and not m.guided
        ]
        moves = [m for m in moves if not (m.kind == "test" and not m.guided)]
    order = {id(m): i for i, m in enumerate(moves)}
    return sorted(moves, key=lambda m: (-m.value, order[id(m)])), held


def _reads(m: Move) -> bool:
    return m.kind == "read" or m.reading


def ranked(sit: Situation) -> tuple[list[Move], list[tuple[Move, str]]]:
    """The proposers' moves for this situation, ranked (:func:`rank`)."""
    return rank(propose(sit), bool(sit.proven()))


def choose(sit: Situation) -> Move | None:
    """The next move, recorded in the ledger with its alternatives; None when none is left."""
    moves, _held = ranked(sit)
    if not moves:
        return None
    best = moves[0]
    others = moves[1 : 1 + ALTERNATIVES]
    sit.ledger.note(
        f"next: {best.said} ({best.why})"
        + (f"; over {', '.join(m.said for m in others)}" if others else ""),
        choice={
            "move": best.key,
            "kind": best.kind,
            "value": round(best.value, 6),
            "cost_s": round(best.cost_s, 1),
            "gain": best.gain,
            "why": best.why,
            "evidence": best.evidence,
            "alternatives": [
                {"move": m.key, "value": round(m.value, 6), "why": m.why} for m in others
            ],
        },
    )
    return best


def suggestions(sit: Situation) -> list[Suggestion]:
    """The ranked proposals, then the held-back ones with why they wait."""
    moves, held = ranked(sit)
    out = [_said(i + 1, m, None) for i, m in enumerate(moves)]
    out += [_said(len(out) + i + 1, m, why) for i, (m, why) in enumerate(held)]
    return out


def _said(rank: int, m: Move, waits: str | None) -> Suggestion:
    arm = m.arm
    return Suggestion(
        rank=rank,
        move=m.said,
        kind=m.kind,
        intervention=" + ".join((arm.intervention, *arm.also)) if arm else None,
        run=arm.run if arm else None,
        hypothesis=m.hypothesis,
        value=round(m.value, 6),
        cost_s=round(m.cost_s, 1),
        gain=m.gain,
        guided=m.guided,
        why=m.why,
        evidence=m.evidence,
        waits=waits,
    )

"""The searches, as pure functions over a predicate: no git, no launches.

- :func:`first_bad` is ``git bisect`` over positions ``lo < i < hi`` of an ordered history,
  ``lo`` good and ``hi`` bad: it probes the untested position nearest the middle, so it
  needs ceil(log2(hi - lo)) probes plus one per skip. A skip (the position does not run)
  is neither good nor bad; when only skips are left between the last good and the first
  bad, the answer is every position in between, as ``git bisect`` says "only skipped
  commits left to test".
- :func:`ddmin` is Zeller's delta debugging: from a set whose test passes, a 1-minimal
  subset that still passes (removing any one element makes it fail). An unresolved test
  (None) counts as not passing. Results are memoised by subset.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from .model import Outcome

T = TypeVar("T")


class Bracket(BaseModel):
    """Where a search ended: ``lo`` good, ``hi`` bad, ``skipped`` between them."""

    lo: int
    hi: int
    skipped: list[int]

    @property
    def exact(self) -> bool:
        return self.hi - self.lo == 1


def probes_left(lo: int, hi: int, skipped: int = 0) -> int:
    """Probes a bisection of (lo, hi) still needs, skips aside."""
    inner = hi - lo - 1 - skipped
    return 0 if inner <= 0 else math.ceil(math.log2(inner + 1))


def first_bad(
    lo: int,
    hi: int,
    test: Callable[[int], Outcome],
    before: Callable[[int, int], None] | None = None,
) -> Bracket:
    """``before`` hears, ahead of each probe, how many probes are still expected and how
    many positions are still untested between the last good and the first bad."""
    skipped: set[int] = set()
    while True:
        inner = [i for i in range(lo + 1, hi) if i not in skipped]
        if not inner:
            return Bracket(lo=lo, hi=hi, skipped=sorted(s for s in skipped if lo < s < hi))
        if before is not None:
            before(probes_left(lo, hi, len(skipped & set(range(lo + 1, hi)))), len(inner))
        mid = (lo + hi) / 2
        pick = min(inner, key=lambda i: (abs(i - mid), i))
        outcome = test(pick)
        if outcome == "good":
            lo = pick
        elif outcome == "bad":
            hi = pick
        else:
            skipped.add(pick)


def _split(items: Sequence[T], n: int) -> list[list[T]]:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return [c for c in out if c]


def ddmin(items: Sequence[T], test: Callable[[list[T]], bool | None]) -> list[T]:
    """A 1-minimal subset of ``items`` (whose own test passes) that passes ``test``."""
    memo: dict[tuple[int, ...], bool | None] = {}

    def passes(subset: list[int]) -> bool:
        key = tuple(sorted(subset))
        if key not in memo:
            memo[key] = test([items[k] for k in key])
        return memo[key] is True

    current = list(range(len(items)))
    n = 2
    while len(current) >= 2:
        chunks = _split(current, n)
        for chunk in chunks:
            if passes(chunk):
                current, n = chunk, 2
                break
        else:
            # with two chunks each one's complement is the other, tested just above
            for chunk in chunks if len(chunks) > 2 else []:
                rest = [k for k in current if k not in chunk]
                if passes(rest):
                    current, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(current):
                    break
                n = min(2 * n, len(current))
    return [items[k] for k in current]

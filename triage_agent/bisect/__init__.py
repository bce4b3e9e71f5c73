"""Software updates: bisect commits, then hunks, to the smallest change that moves the bits.

    from triage_agent.bisect import bisect_case
    result = bisect_case(case, ledger, budget_s=1800, progress=print)

See :mod:`.bisection` for the method and its limits, :mod:`.probe` for the predicate and
how a stopped bisection resumes from the ledger, :mod:`.search` for the pure searches.
"""

from .bisection import bisect_case
from .model import BisectProgress, BisectResult, CommitInfo, Hunk, HunkOutcome, ProbeResult

__all__ = [
    "BisectProgress",
    "BisectResult",
    "CommitInfo",
    "Hunk",
    "HunkOutcome",
    "ProbeResult",
    "bisect_case",
]

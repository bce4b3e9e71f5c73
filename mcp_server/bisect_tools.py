"""``bisect_source``: the first commit that moves the bits, then a minimal set of hunks.

A thin adapter over :func:`triage_agent.bisect.bisect_case`, the function behind
``triage bisect``. The caller names at most a repository (a path inside the case's source
roots) and a revision range; what is launched is always the startup case file's run B
(``Workspace.require_launch``), in throwaway worktrees, never a command from the call.
Revisions pass ``check_rev`` and must resolve in the repository before anything runs.
Progress notifications carry each probe's outcome; a call stopped by its budget resumes
on the next call from the ledger.
"""

from __future__ import annotations

from pydantic import Field

from triage_agent.bisect import BisectProgress, BisectResult, bisect_case
from triage_agent.paths import split_rev_range

from .security import MAX_PATH_CHARS, Workspace, cap_text
from .spec import In, Progress

MAX_DIFF_CHARS = 20_000


class BisectSourceIn(In):
    repo: str | None = Field(
        default=None,
        max_length=MAX_PATH_CHARS,
        description="the repository to bisect, inside the case's source roots "
        "(default: run B's source repository)",
    )
    range: str | None = Field(
        default=None,
        max_length=401,
        description="'A..B', branch, tag or commit names (default: the runs' source revisions)",
    )
    hunks: bool = Field(default=True, description="narrow the culprit commits down to hunks")
    budget_minutes: float = Field(
        default=30.0, gt=0, le=24 * 60, description="start no probe after this long"
    )
    timeout_s: float = Field(default=600.0, gt=0, le=3600, description="per launch command")


def bisect_source(ws: Workspace, args: BisectSourceIn, progress: Progress) -> BisectResult:
    """Bisect the case's source revisions (or a range in a repository inside its roots) to
    the first commit at which run B, rerun uninstrumented in a throwaway worktree, differs
    from run A on some step or rank; a commit where B does not run is skipped. When
    reverting that commit alone does not make B match A, find a minimal set of commits, then
    of hunks, whose revert does, prove it with one rerun, and record each hunk reverted
    alone. Every probe is ledger evidence; calling again resumes without rerunning a probe.
    Whether a found change is a bug or a valid numerical-policy change is for the reader:
    each hunk's diff is returned."""
    case = ws.require_launch()
    repo = ws.path(args.repo, must_exist=True) if args.repo is not None else None
    if args.range is not None:
        where = repo or (case.run_b.source.repo if case.run_b.source else None)
        for rev in split_rev_range(args.range):
            if where is not None:
                ws.rev(where, rev)
    ws.output_dir("runs")

    def report(p: BisectProgress) -> None:
        total = p.done + p.left if p.left is not None else None
        progress(p.done, total, cap_text(f"{p.phase}: {p.message}", 500))

    res = bisect_case(
        case,
        ws.ledger,
        repo=repo,
        rev_range=args.range,
        hunks=args.hunks,
        budget_s=args.budget_minutes * 60,
        timeout_s=args.timeout_s,
        progress=report,
    )
    done = len(res.probes)
    progress(done, done, cap_text(res.message, 500))
    hunks = [
        h.model_copy(
            update={
                "hunk": h.hunk.model_copy(update={"diff": cap_text(h.hunk.diff, MAX_DIFF_CHARS)})
            }
        )
        for h in res.hunks
    ]
    return res.model_copy(update={"hunks": hunks})

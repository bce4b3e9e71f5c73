"""The records of a bisection: what one probe ran and found, the hunks, the result.

Everything here crosses a boundary (the ledger, the CLI's JSON, an MCP tool's output), so
each is a pydantic model. A probe's tree is named by :class:`TreeSpec` alone: the commit
checked out, a side-branch commit merged into it, and the commits and hunks reverse-applied
on top; its :meth:`TreeSpec.key` is how a resumed bisection finds a probe in the ledger.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, Field

Outcome = Literal["good", "bad", "skip"]
Phase = Literal["bisect", "revert", "commits", "hunks", "alone", "effect", "proof"]
Status = Literal["found", "first-bad", "ambiguous", "not-in-range", "stopped"]
Mode = Literal["source-dir", "pythonpath"]

READER_NOTE = (
    "whether the new arithmetic is a bug or a valid numerical-policy change is for the "
    "reader to judge"
)


class CommitInfo(BaseModel):
    sha: str
    subject: str
    index: int = Field(description="position on the first-parent chain, 1 = oldest after A")
    merge: bool = False
    side_of: str | None = Field(
        default=None, description="for a commit brought in by a merge: that merge's sha"
    )

    @property
    def short(self) -> str:
        return self.sha[:10]

    def said(self) -> str:
        return f"{self.short} {self.subject!r}"


def reader_note(hunks_searched: bool, culprits: list[CommitInfo]) -> str:
    """The reader's part, pointing at the diff to judge: the hunks' own, which the result
    holds, or, when the hunks were not searched, each culprit commit's, which it does not."""
    if hunks_searched:
        return f"{READER_NOTE}: the diff of each hunk is shown"
    shows = ", ".join(f"`git show {c.short}`" for c in culprits)
    return f"{READER_NOTE}: the hunks were not searched, so no diff is shown; see {shows}"


class TreeSpec(BaseModel):
    """The source tree one probe runs B in, built in a throwaway worktree."""

    base: str = Field(description="the commit checked out")
    merge: str | None = Field(
        default=None, description="a side-branch commit merged into base (not committed)"
    )
    revert_commits: list[str] = Field(
        default_factory=list,
        description="commits whose diff (from their first parent) is reverse-applied, newest first",
    )
    revert_hunks: list[str] = Field(
        default_factory=list, description="hunk ids reverse-applied, in the order applied"
    )

    def key(self, salt: str) -> str:
        """What identifies this probe in the ledger; ``salt`` binds it to the case's runs."""
        text = json.dumps([salt, self.model_dump(mode="json")], sort_keys=True)
        return "P-" + hashlib.sha256(text.encode()).hexdigest()[:16]


class Hunk(BaseModel):
    """One hunk of a commit's diff, revertible on its own with ``git apply -R``."""

    id: str
    commit: str
    file: str
    header: str = Field(description="the @@ line, or what git says of a whole-file change")
    line: int = Field(description="first changed line in the commit's version of the file")
    diff: str = Field(description="the hunk as git shows it (file header and hunk)")
    location: str = Field(
        description="file:line in run B's revision, where the hunk's change sits there; "
        "file:line@commit when it cannot be placed in B"
    )


class ProbeResult(BaseModel):
    """One predicate evaluation: B built as ``tree``, rerun uninstrumented, compared with A."""

    key: str
    phase: Phase
    tree: TreeSpec
    outcome: Outcome = Field(
        description="good: every step and rank matches A; bad: a step "
        "differs; skip: B did not run there (or the tree could not be built)"
    )
    said: str = Field(description="what the comparison said, one line")
    first_differing_step: int | None = None
    evidence_id: str
    launched: bool = Field(description="False when the outcome was read from the ledger")
    seconds: float = 0.0


class HunkOutcome(BaseModel):
    hunk: Hunk
    alone: ProbeResult | None = Field(
        default=None, description="B with only this hunk reverted (None: not reached)"
    )
    kept: ProbeResult | None = Field(
        default=None,
        description="B with the set's other hunks reverted, this one kept: its own effect, "
        "whose first differing step says where in the run it starts to show",
    )

    @property
    def first_effect(self) -> float:
        """The first step at which this hunk on its own moves the bits (inf: none seen)."""
        step = self.kept.first_differing_step if self.kept else None
        return float("inf") if step is None else float(step)


class BisectProgress(BaseModel):
    phase: Phase
    done: int = Field(description="probes evaluated so far in this call")
    left: int | None = Field(default=None, description="an estimate of the probes still to go")
    commits_left: int | None = Field(
        default=None, description="commits the current search has not yet ruled in or out"
    )
    eta_s: float | None = Field(default=None, description="left times the mean launch time")
    message: str


class BisectResult(BaseModel):
    repo: str
    mode: Mode = Field(
        description="source-dir: B runs inside the worktree; pythonpath: the "
        "worktree is put first on PYTHONPATH (a package B imports)"
    )
    a_rev: str
    b_rev: str
    a: str
    b: str
    status: Status
    message: str = Field(description="the conclusion, in sentences")
    commits: list[CommitInfo] = Field(description="the first-parent range, oldest first")
    first_bad: CommitInfo | None = None
    first_bad_unit: CommitInfo | None = Field(
        default=None, description="the first-parent commit holding first_bad (a merge, or it)"
    )
    candidates: list[CommitInfo] = Field(
        default_factory=list, description="when skips leave the first bad commit ambiguous"
    )
    skipped: list[CommitInfo] = Field(
        default_factory=list, description="commits the bisection probed where B does not run"
    )
    revert_first_bad: ProbeResult | None = None
    culprits: list[CommitInfo] = Field(
        default_factory=list, description="a minimal set of commits whose revert restores A"
    )
    hunks: list[HunkOutcome] = Field(
        default_factory=list,
        description="a minimal set of hunks, each with its own outcomes, the one whose own "
        "effect shows at the earliest step first",
    )
    proof: ProbeResult | None = Field(
        default=None, description="B with exactly the culprits (or hunks) reverted"
    )
    hypothesis: str | None = Field(default=None, description="supported when proof matched")
    probes: list[ProbeResult] = Field(
        default_factory=list,
        description="in the order first asked (a tree asked again is one probe)",
    )
    probes_to_first_bad: int = 0
    reruns: int = Field(default=0, description="probes launched by this call")
    reused: int = Field(
        default=0, description="probes an earlier call recorded, read back from the ledger"
    )
    cached: int = Field(
        default=0, description="probes whose tree matched an earlier one's: its outputs reused"
    )
    seconds: float = 0.0
    reader_note: str = Field(
        default=READER_NOTE, description="the reader's part, and where the diff to judge is"
    )

"""Throwaway worktrees: the source tree of one probe, built from the repository's objects.

A probe's tree (:class:`TreeSpec`) is made by ``git worktree add --detach`` of its base
commit under the system's temporary directory (never inside the user's work tree, never
inside the workspace, whose content a rerun's cache key leaves out), then a side commit is
merged in without committing, then commits and hunks are reverse-applied with
``git apply -R`` (a whole commit falls back to ``--3way`` when its context has moved). A
tree that cannot be built is :class:`TreeNotBuilt`: the probe is a skip, never bad. The
worktree is removed when the probe is done, also after an error or Ctrl-C.

The user's files are never touched: only git's own worktree bookkeeping in the repository
changes, and ``git worktree prune`` clears what a killed process left.

Limits: the worktree's path is named by the probe, so two bisections of the same
repository asking for the same probe at the same moment are not coordinated.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import TriageError
from .history import HUNK_RE, commit_patch, hunks
from .model import Hunk, TreeSpec

# a merge probe commits nothing, but git asks for an identity before it merges
MERGE_ENV = {
    "GIT_AUTHOR_NAME": "bitwise-triage",
    "GIT_AUTHOR_EMAIL": "bisect@localhost",
    "GIT_COMMITTER_NAME": "bitwise-triage",
    "GIT_COMMITTER_EMAIL": "bisect@localhost",
}


class TreeNotBuilt(TriageError):
    """A probe's tree cannot be made (a merge conflicts, a revert does not apply)."""


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "stderr", None) or str(exc)
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__)[:200].removeprefix("stderr: ")


def scratch_root() -> Path:
    root = Path(tempfile.gettempdir()) / f"triage-bisect-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    return root


class Patches:
    """Each commit's diff and hunks, computed once per bisection."""

    def __init__(self, repo, context: int = 3) -> None:
        self.repo = repo
        # 0: each change its own hunk, placed by line number (reverted bottom up)
        self.context = context
        self._commit: dict[str, str] = {}
        self._hunks: dict[str, list[Hunk]] = {}
        self._hunk_patch: dict[str, str] = {}

    def commit(self, sha: str) -> str:
        if sha not in self._commit:
            self._commit[sha] = commit_patch(self.repo, sha)
        return self._commit[sha]

    def hunks_of(self, sha: str) -> list[Hunk]:
        if sha not in self._hunks:
            pairs = hunks(self.repo, sha, self.context)
            self._hunks[sha] = [h for h, _ in pairs]
            self._hunk_patch.update((h.id, p) for h, p in pairs)
        return self._hunks[sha]

    def find(self, hid: str) -> Hunk | None:
        return next((h for hs in self._hunks.values() for h in hs if h.id == hid), None)

    def hunk(self, hid: str) -> str:
        if hid not in self._hunk_patch:
            raise TreeNotBuilt(f"hunk {hid} is not one of the commits' hunks read so far")
        return self._hunk_patch[hid]


def remove_worktree(repo, path: Path) -> None:
    import git

    try:
        repo.git.worktree("remove", "--force", "--force", str(path))
    except git.GitCommandError:
        shutil.rmtree(path, ignore_errors=True)
        repo.git.worktree("prune")


def _apply_reverse(wt, patch: str, what: str, *, three_way: bool, zero: bool = False) -> None:
    import git

    fd, name = tempfile.mkstemp(prefix="revert-", suffix=".patch", dir=scratch_root())
    try:
        with os.fdopen(fd, "w") as f:
            f.write(patch if patch.endswith("\n") else patch + "\n")
        try:
            wt.git.apply("-R", "--whitespace=nowarn", *(["--unidiff-zero"] if zero else []), name)
            return
        except git.GitCommandError as exc:
            if not three_way:
                raise TreeNotBuilt(f"{what} does not revert cleanly: {_first_line(exc)}") from None
            first = exc
        try:
            wt.git.apply("-R", "--3way", "--whitespace=nowarn", name)
        except git.GitCommandError:
            raise TreeNotBuilt(f"{what} does not revert cleanly: {_first_line(first)}") from None
    finally:
        os.unlink(name)


@contextmanager
def built(repo, tree: TreeSpec, name: str, patches: Patches) -> Iterator[Path]:
    """The tree in a fresh worktree, removed on exit; TreeNotBuilt when it cannot be made."""
    import git

    path = scratch_root() / name
    if path.exists():  # left by a killed run
        remove_worktree(repo, path)
    repo.git.worktree("prune")
    repo.git.worktree("add", "--detach", str(path), tree.base)
    try:
        wt = git.Repo(path)
        if tree.merge:
            try:
                wt.git.merge("--no-commit", "--no-ff", tree.merge, env=MERGE_ENV)
            except git.GitCommandError as exc:
                raise TreeNotBuilt(
                    f"{tree.merge[:10]} does not merge cleanly into {tree.base[:10]}: "
                    f"{_first_line(exc)}"
                ) from None
        for sha in tree.revert_commits:
            _apply_reverse(wt, patches.commit(sha), f"commit {sha[:10]}", three_way=True)
        order = list(tree.revert_hunks)
        if patches.context == 0:
            # hunks without context are placed by their line numbers: reverting the lower
            # ones first leaves the numbers of those above them true
            def pos(hid: str) -> tuple[str, int]:
                h = patches.find(hid)
                return (h.file, -h.line) if h is not None else ("", 0)

            order.sort(key=pos)
        for hid in order:
            _apply_reverse(
                wt, patches.hunk(hid), f"hunk {hid}", three_way=False, zero=patches.context == 0
            )
        yield path
    finally:
        remove_worktree(repo, path)


def place_in(repo, b: str, hunk: Hunk, patches: Patches) -> str:
    """Where ``hunk`` sits in B's revision, file:line, found by reverting it there alone;
    file:line@commit (the commit's own numbering) when it does not revert on B."""
    import git

    tree = TreeSpec(base=b, revert_hunks=[hunk.id])
    try:
        with built(repo, tree, f"place-{hunk.id}", patches) as path:
            text = git.Repo(path).git.diff("-U0", "--no-color", "HEAD", "--", hunk.file)
    except TreeNotBuilt:
        return f"{hunk.file}:{hunk.line}@{hunk.commit[:10]}"
    for line in text.splitlines():
        m = HUNK_RE.match(line)
        if m:
            return f"{hunk.file}:{max(int(m.group(1)), 1)}"
    return f"{hunk.file}:{hunk.line}@{hunk.commit[:10]}"

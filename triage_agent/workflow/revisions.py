"""What changed between run A's and run B's source revisions, read with GitPython.

One rule for the headless workflow and the MCP tools: every file the diff between the two
commits names, with how it changed (added, deleted, modified, renamed), paths relative to
the repository root. Git trouble (no repository, a revision that does not resolve) is a
one-line :class:`InputError`, never an empty list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from ..errors import InputError
from ..paths import check_rev
from ..records import Case, SourceSpec

Change = Literal["added", "deleted", "modified", "renamed", "type-changed"]
_CHANGE: dict[str, Change] = {
    "A": "added",
    "D": "deleted",
    "M": "modified",
    "R": "renamed",
    "T": "type-changed",
}


class ChangedFile(BaseModel):
    path: str
    change: Change
    old_path: str | None = None


class Revisions(BaseModel):
    """The two runs' commits in B's repository."""

    repo: str
    a: str
    b: str
    a_rev: str
    b_rev: str


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def resolve(case: Case) -> Revisions:
    """Both runs' revisions as commit ids in run B's repository."""
    import git
    from gitdb.exc import ODBError

    a, b = case.run_a.source, case.run_b.source
    if a is None or b is None or not a.rev:
        raise InputError(
            "comparing the runs' sources needs both runs' sources and run A's revision "
            "(runs.<x>.source with repo and rev)"
        )
    try:
        repo = git.Repo(b.repo, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise InputError(f"run B's source {b.repo} is not inside a git repository") from None

    def commit(src: SourceSpec, which: str) -> str:
        rev = check_rev(src.rev or "HEAD")
        try:
            return repo.commit(rev).hexsha
        except (git.GitError, ODBError, ValueError) as exc:
            raise InputError(
                f"run {which}'s revision {rev!r} does not resolve in {b.repo}: {_one_line(exc)}"
            ) from None

    return Revisions(
        repo=str(Path(repo.working_tree_dir or repo.git_dir).resolve()),
        a=commit(a, "A"),
        b=commit(b, "B"),
        a_rev=a.rev,
        b_rev=b.rev or "HEAD",
    )


def changed_files(case: Case) -> list[ChangedFile]:
    """Every file that differs between A's and B's commits, in the order git lists them."""
    import git

    revs = resolve(case)
    repo = git.Repo(revs.repo)
    try:
        diffs = repo.commit(revs.a).diff(revs.b)
    except git.GitError as exc:
        raise InputError(f"git diff {revs.a_rev}..{revs.b_rev} failed: {_one_line(exc)}") from None
    out = []
    for d in diffs:
        change = _CHANGE.get(d.change_type, "modified")
        path = d.a_path if change == "deleted" else d.b_path
        out.append(
            ChangedFile(
                path=path or d.a_path or "",
                change=change,
                old_path=d.a_path if change == "renamed" else None,
            )
        )
    return out


def content_at(case: Case, commit: str, path: str) -> bytes | None:
    """A file's bytes at ``commit``, or None when the commit has no such file."""
    import git

    repo = git.Repo(resolve(case).repo)
    try:
        tree = repo.commit(commit).tree
    except git.GitError as exc:
        raise InputError(f"cannot read commit {commit[:12]}: {_one_line(exc)}") from None
    try:
        blob = tree / path
    except KeyError:
        return None
    return blob.data_stream.read()

"""The history a bisection walks, and the diffs it reverts, read from git.

- :func:`open_range` checks the repository and both revisions (flag-like or unresolvable
  ones are a one-line :class:`InputError`) and lists the first-parent chain from A's
  commit to B's, oldest first. A's commit must be an ancestor of B's; when it sits on a
  merged side branch rather than on B's first-parent chain, the chain starts after the
  first commit on it that A already contains.
- :func:`side_commits` lists what a merge brought in (the first-parent chain of its second
  parent that its first parent lacks), so a bad merge can be opened up.
- :func:`commit_patch` and :func:`hunks` give a commit's diff from its first parent, whole
  or cut into hunks that ``git apply -R`` can take back one at a time. A file whose change
  is not a text hunk (binary, a mode change, a rename, an empty file) is one unit.

Revisions reach git only as commit ids resolved in-process by GitPython, never as text a
command line could read as an option.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from pydantic import BaseModel

from ..errors import InputError
from ..paths import check_rev
from .model import CommitInfo, Hunk

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# a file header line that changes more than content: such a file is reverted whole
WHOLE_FILE = ("old mode", "new mode", "rename from", "copy from", "similarity index")


class Range(BaseModel):
    repo: str
    a_rev: str
    b_rev: str
    a: str
    b: str
    base: str
    commits: list[CommitInfo]


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else type(exc).__name__


def open_repo(path: str | Path):
    import git

    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise InputError(f"{path} is not inside a git repository") from None


def resolve(repo, rev: str, which: str) -> str:
    import git
    from gitdb.exc import ODBError

    check_rev(rev)
    try:
        return repo.commit(rev).hexsha
    except (git.GitError, ODBError, ValueError, IndexError) as exc:
        raise InputError(
            f"{which} revision {rev!r} does not resolve in {repo.working_tree_dir or repo.git_dir}: "
            f"{_first_line(exc)}"
        ) from None


def _info(commit, index: int, side_of: str | None = None) -> CommitInfo:
    subject = (commit.message or "").strip().splitlines()
    return CommitInfo(
        sha=commit.hexsha,
        subject=subject[0][:120] if subject else "",
        index=index,
        merge=len(commit.parents) > 1,
        side_of=side_of,
    )


def _chain(repo, head: str, stop: str) -> tuple[str, list]:
    """First parents from ``head`` back to the first commit ``stop`` already contains
    (that commit, then the chain after it, oldest first); one ``rev-list`` call."""
    shas = repo.git.rev_list("--first-parent", "--reverse", head, f"^{stop}").split()
    chain = [repo.commit(s) for s in shas]
    if not chain:
        return head, []
    parents = chain[0].parents
    return (parents[0].hexsha if parents else stop), chain


def open_range(repo_path: str | Path, a_rev: str, b_rev: str) -> Range:
    repo = open_repo(repo_path)
    a = resolve(repo, a_rev, "run A's")
    b = resolve(repo, b_rev, "run B's")
    if a == b:
        raise InputError(f"{a_rev} and {b_rev} are the same commit {a[:12]}: nothing to bisect")
    if not repo.is_ancestor(a, b):
        raise InputError(
            f"run A's revision {a_rev} is not an ancestor of run B's {b_rev}: a bisection "
            "needs B's history to contain A"
        )
    base, chain = _chain(repo, b, a)
    return Range(
        repo=str(Path(repo.working_tree_dir or repo.git_dir).resolve()),
        a_rev=a_rev,
        b_rev=b_rev,
        a=a,
        b=b,
        base=base,
        commits=[_info(c, i) for i, c in enumerate(chain, start=1)],
    )


def side_commits(repo_path: str | Path, merge: CommitInfo) -> list[CommitInfo]:
    """The first-parent chain of a merge's second parent that its first parent lacks."""
    repo = open_repo(repo_path)
    m = repo.commit(merge.sha)
    first, second = m.parents[0].hexsha, m.parents[1].hexsha
    _base, chain = _chain(repo, second, first)
    return [_info(c, i, side_of=merge.sha) for i, c in enumerate(chain, start=1)]


def first_parent(repo, sha: str) -> str:
    c = repo.commit(sha)
    if not c.parents:
        raise InputError(f"commit {sha[:12]} has no parent: it cannot be reverted")
    return c.parents[0].hexsha


def commit_patch(repo, sha: str, context: int = 3) -> str:
    """The commit's whole diff from its first parent, as ``git apply`` reads it, with
    ``context`` lines around each change (0: every change its own hunk)."""
    return repo.git.diff(
        f"-U{context}",
        "--binary",
        "--full-index",
        "--no-color",
        "--no-ext-diff",
        first_parent(repo, sha),
        sha,
        strip_newline_in_stdout=False,
    )


def _file_blocks(patch: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git ") or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    return [b for b in blocks if b and b[0].startswith("diff --git ")]


def _path_of(header: list[str]) -> str:
    for line in header:
        if line.startswith("+++ ") and not line.startswith("+++ /dev/null"):
            return line[4:].strip().removeprefix("b/")
    for line in header:
        if line.startswith("--- ") and not line.startswith("--- /dev/null"):
            return line[4:].strip().removeprefix("a/")
    words = header[0].split()
    return words[-1].removeprefix("b/") if words else "?"


def _first_changed(hunk_lines: list[str], new_start: int) -> int:
    line = new_start
    for text in hunk_lines[1:]:
        if text.startswith(("+", "-")):
            return max(line, 1)
        if text.startswith(" "):
            line += 1
    return max(new_start, 1)


def _hunk_id(sha: str, file: str, k: int, text: str) -> str:
    return "K-" + hashlib.sha256(f"{sha}|{file}|{k}|{text}".encode()).hexdigest()[:12]


def hunks(repo, sha: str, context: int = 3) -> list[tuple[Hunk, str]]:
    """(hunk, its own patch) for each hunk of the commit's diff from its first parent.

    The patch holds the file's header (without its ``index`` line, which names whole-file
    blobs) and the one hunk; ``git apply`` places it by context, allowing for lines that
    later commits moved."""
    out: list[tuple[Hunk, str]] = []
    for block in _file_blocks(commit_patch(repo, sha, context)):
        first = next((i for i, ln in enumerate(block) if ln.startswith("@@")), None)
        header = block if first is None else block[:first]
        file = _path_of(header)
        whole = first is None or any(ln.startswith(WHOLE_FILE) for ln in header)
        if whole:
            text = "".join(block)
            said = next((ln.strip() for ln in header[1:] if not ln.startswith("index ")), "")
            h = Hunk(
                id=_hunk_id(sha, file, 0, text),
                commit=sha,
                file=file,
                header=said or "whole file",
                line=1,
                diff=text,
                location=f"{file}:1",
            )
            out.append((h, text))
            continue
        head = "".join(ln for ln in header if not ln.startswith("index "))
        starts = [i for i in range(first, len(block)) if block[i].startswith("@@")] + [len(block)]
        for k, (lo, hi) in enumerate(zip(starts, starts[1:], strict=False)):
            lines = block[lo:hi]
            m = HUNK_RE.match(lines[0])
            new_start = int(m.group(3)) if m else 1
            body = "".join(lines)
            line = _first_changed(lines, new_start)
            h = Hunk(
                id=_hunk_id(sha, file, k, body),
                commit=sha,
                file=file,
                header=lines[0].rstrip("\n"),
                line=line,
                diff=head + body,
                location=f"{file}:{line}",
            )
            out.append((h, head + body))
    return out

"""A proven path setting narrowed to the hunks that carry it.

A run that takes its own package from a directory named by a path-valued variable (run A
``PYTHONPATH=v1``, run B ``PYTHONPATH=v2``: version N and version N+1 side by side) differs
by whatever differs between the two trees. Once giving B A's value is proven to make every
step match, the two trees become two commits of a throwaway repository in the workspace (A's
tree, then B's) and the bisection's hunk search runs on them: B rerun with hunks of the diff
reverted, put first on its path, until the smallest set whose revert restores every step is
found and proven by one more rerun. Each hunk is then named in B's tree as the run names it
(``v2/pkg/model.py:20``).

What this finds is the smallest change of B's tree that gives back A's bits. Where a change
in one file exposes a fragile reader in another (a rename that a name filter elsewhere no
longer matches), it names the change, not the reader: the verdict says which rule chose.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ..errors import InputError
from ..ledger import Ledger
from ..records import Case, RunSpec
from .fixcheck import SourceChange, bisect_source_change

_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".git", ".triage")


def _dir(value: str, run: RunSpec) -> Path | None:
    p = Path(value)
    if not p.is_absolute():
        p = Path(run.cwd or ".") / p
    return p.resolve() if p.is_dir() else None


def tree_pair(case: Case, key: str) -> tuple[Path, Path, str] | None:
    """(A's directory, B's directory, B's entry as the run names it) when the runs' values
    of ``key`` are path lists that differ in exactly one entry, a directory in both; else
    None (nothing to narrow, or more than one pair of trees)."""
    a, b = case.run_a.env.get(key), case.run_b.env.get(key)
    if not a or not b:
        return None
    ea, eb = a.split(os.pathsep), b.split(os.pathsep)
    if len(ea) != len(eb):
        return None
    pairs = [(x, y) for x, y in zip(ea, eb, strict=True) if x != y]
    if len(pairs) != 1:
        return None
    x, y = pairs[0]
    da, db = _dir(x, case.run_a), _dir(y, case.run_b)
    if da is None or db is None or da == db:
        return None
    return da, db, y


def _fill(root: Path, tree: Path) -> None:
    for child in root.iterdir():
        if child.name == ".git":
            continue
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    shutil.copytree(tree, root, ignore=_IGNORED, dirs_exist_ok=True)


def trees_repo(workspace: Path, a_dir: Path, b_dir: Path) -> tuple[Path, str, str]:
    """A repository of two commits, A's tree then B's, made once per pair of trees and
    their content: (its path, A's commit, B's commit)."""
    import git

    digest = hashlib.sha256()
    for tree in (a_dir, b_dir):
        for f in sorted(tree.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                digest.update(str(f.relative_to(tree)).encode() + b"\0" + f.read_bytes())
        digest.update(b"\1")
    root = workspace / "trees" / digest.hexdigest()[:16]
    marker = root / ".git" / "triage-trees"
    if marker.exists():
        a, b = marker.read_text().split()
        return root, a, b
    if root.exists():
        shutil.rmtree(root)  # a repository left half made
    root.mkdir(parents=True)
    repo = git.Repo.init(root)
    who = git.Actor("bitwise-triage", "triage@localhost")
    shas = []
    for label, tree in (("A", a_dir), ("B", b_dir)):
        _fill(root, tree)
        repo.git.add(A=True)
        commit = repo.index.commit(f"run {label}'s tree: {tree}", author=who, committer=who)
        shas.append(commit.hexsha)
    marker.write_text(" ".join(shas))
    return root, shas[0], shas[1]


def narrow_tree_change(
    case: Case,
    ledger: Ledger,
    key: str,
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> SourceChange | None:
    """Bisect the hunks between the two trees ``key`` names; None (noted) when there is no
    pair of trees or no proven set of hunks."""
    pair = tree_pair(case, key)
    if pair is None:
        return None
    a_dir, b_dir, b_entry = pair
    try:
        root, a, b = trees_repo(Path(ledger.workspace), a_dir, b_dir)
    except (OSError, InputError) as exc:
        ledger.note(f"the trees {a_dir} and {b_dir} could not be compared: {exc}", level="warning")
        return None
    ledger.note(
        f"{key} differs by one directory ({a_dir} in A, {b_dir} in B): its two trees are "
        f"bisected as two commits of {root}, B's hunks reverted on B's path until every "
        "step matches"
    )
    prefix = b_entry.rstrip("/\\")
    return bisect_source_change(
        case,
        ledger,
        timeout_s=timeout_s,
        deadline=deadline,
        on_status=on_status,
        repo=root,
        rev_range=f"{a}..{b}",
        extra_roots=[root],
        place=lambda loc: f"{prefix}/{loc}",
        same_job_without=key,
        # two trees are one commit: every change its own hunk, so the one that carries the
        # difference is not merged with its neighbours (a docstring, a signature)
        context=0,
    )

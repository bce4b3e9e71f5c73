"""Bounding a scan: which files, which lines, read from where.

Scope sources: explicit paths (files, directories, or dotted module names resolved without
importing the package), the files and hunks changed between two git revisions (read from
the revision's tree with GitPython, never from the work tree), and a line window around
FILE:LINE locations. Exclusion globs apply to every source.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from triage_agent.errors import InputError
from triage_agent.paths import split_rev_range

from .unit import Lang, lang_for

DEFAULT_EXCLUDES = [
    "**/tests/**",
    "**/test/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/third_party/**",
    "**/vendor/**",
    "**/_vendor/**",
    "**/node_modules/**",
]
_MODULE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_HUNK_RE = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)


@dataclass
class SourceItem:
    """One file to scan: how to name it, how to read it, which lines matter."""

    display: str
    lang: Lang
    read: Callable[[], bytes]
    size: int
    module: str | None = None  # dotted module name, where the source already tells it
    fs_path: Path | None = None  # on disk (None when read from a git tree)
    changed: list[tuple[int, int]] | None = None  # diff hunks (new side), 1-based inclusive
    windows: list[tuple[int, int, int]] = field(default_factory=list)  # (start, end, centre)


@lru_cache(maxsize=256)
def _glob_re(glob: str) -> re.Pattern[str]:
    # `**/` is any directories (or none); `*` and `?` stay inside one path segment
    out, i = [], 0
    g = glob.lstrip("/")
    while i < len(g):
        if g.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif g.startswith("**", i):
            out.append(".*")
            i += 2
        elif g[i] == "*":
            out.append("[^/]*")
            i += 1
        elif g[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(g[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def excluded(rel: str, globs: list[str]) -> bool:
    """``rel`` is relative to the scan root (or the repository): the root's own name never
    excludes it."""
    path = rel.replace(os.sep, "/").lstrip("/")
    return any(_glob_re(g).match(path) for g in globs)


def _display(p: Path) -> str:
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:
        return str(p)


def _module_of(p: Path) -> str | None:
    if p.suffix != ".py":
        return None
    parts = [p.stem] if p.stem != "__init__" else []
    d = p.parent
    while (d / "__init__.py").exists():
        parts.insert(0, d.name)
        d = d.parent
    return ".".join(parts) or None


def resolve_module(name: str) -> Path | None:
    """Dotted module -> file or package dir, without importing any package code."""
    top, _, rest = name.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    base = Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)
    if not rest:
        return base
    cand = base.joinpath(*rest.split("."))
    for c in (cand.with_suffix(".py"), cand):
        if c.exists():
            return c
    return None


def _file_item(p: Path, display_root: Path | None) -> SourceItem | None:
    lang = lang_for(p.name)
    if lang is None:
        return None
    disp = _display(p)
    if display_root is not None and disp == str(p):
        disp = str(p.relative_to(display_root))
    return SourceItem(disp, lang, p.read_bytes, p.stat().st_size, fs_path=p)


def module_name(item: SourceItem) -> str | None:
    """The dotted module of ``item``, computed only when a finding needs it."""
    if item.module is None and item.fs_path is not None:
        item.module = _module_of(item.fs_path)
    return item.module


def from_paths(paths: list[str], excludes: list[str]) -> list[SourceItem]:
    items: list[SourceItem] = []
    seen: set[Path] = set()
    for raw in paths:
        if raw.startswith("-"):
            raise InputError(f"path {raw!r} looks like an option; put paths after --")
        p = Path(raw).expanduser()
        if not p.exists():
            mod = resolve_module(raw) if _MODULE_RE.match(raw) and "/" not in raw else None
            if mod is None:
                raise InputError(
                    f"path not found: {raw} (not a file, directory or importable module)"
                )
            p = mod
        p = p.resolve()
        if p.is_file():
            if p not in seen:
                seen.add(p)
                item = _file_item(p, p.parent.parent)
                if item is None:
                    raise InputError(f"{raw}: not a Python or C++/CUDA source file")
                items.append(item)
            continue
        for d, dirs, files in os.walk(p):
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__")
            for fname in sorted(files):
                fp = Path(d) / fname
                if lang_for(fname) is None or fp in seen:
                    continue
                if excluded(str(fp.relative_to(p)), excludes):
                    continue
                seen.add(fp)
                item = _file_item(fp, p.parent)
                if item is not None:
                    items.append(item)
    return items


def parse_around(specs: list[str], window: int) -> dict[Path, list[tuple[int, int, int]]]:
    out: dict[Path, list[tuple[int, int, int]]] = {}
    for spec in specs:
        path, sep, line = spec.rpartition(":")
        if not sep or not line.isdigit() or int(line) < 1:
            raise InputError(f"invalid location {spec!r}: expected FILE:LINE with LINE >= 1")
        p = Path(path).expanduser()
        if not p.is_file():
            raise InputError(f"location {spec!r}: file not found")
        n = int(line)
        out.setdefault(p.resolve(), []).append((max(1, n - window), n + window, n))
    return out


def from_around(specs: list[str], window: int) -> list[SourceItem]:
    items = []
    for p, wins in parse_around(specs, window).items():
        item = _file_item(p, p.parent.parent)
        if item is None:
            raise InputError(f"{p}: not a Python or C++/CUDA source file")
        item.windows = wins
        items.append(item)
    return items


def _hunks(patch: bytes) -> list[tuple[int, int]]:
    out = []
    for m in _HUNK_RE.finditer(patch):
        start = int(m.group(1))
        count = int(m.group(2)) if m.group(2) is not None else 1
        # a pure deletion (count 0) sits between `start` and `start + 1`
        out.append((max(1, start), max(start, start + count - 1)))
    return out


def from_diff(
    spec: str, repo_path: str, paths: list[str], excludes: list[str], window: int
) -> tuple[list[SourceItem], str]:
    """Files and hunks changed between REV_A and REV_B, read from REV_B's tree."""
    import git  # GitPython: imported here so plain path scans do not pay for it

    rev_a, rev_b = split_rev_range(spec)
    if not Path(repo_path).exists():
        raise InputError(f"path not found: {repo_path}")
    try:
        repo = git.Repo(repo_path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise InputError(
            f"--diff needs a git repository, and {repo_path} is not inside one"
        ) from None
    commits = []
    for rev in (rev_a, rev_b):
        try:
            commits.append(repo.commit(rev))
        except (git.BadName, ValueError, git.GitCommandError):
            raise InputError(f"unknown revision {rev!r} in {repo.working_dir}") from None
    ca, cb = commits
    root = Path(repo.working_dir).resolve()
    prefixes = []
    for raw in paths:
        p = Path(raw).expanduser().resolve()
        try:
            prefixes.append(str(p.relative_to(root)).replace(os.sep, "/").strip("."))
        except ValueError:
            raise InputError(f"{raw} is outside the repository {root}") from None
    items: list[SourceItem] = []
    tree_b = cb.tree
    for d in ca.diff(cb, create_patch=True, unified=0):
        if d.deleted_file or d.b_path is None:
            continue
        rel = d.b_path
        lang = lang_for(rel)
        if lang is None or excluded(rel, excludes):
            continue
        if prefixes and not any(
            p == "" or rel == p or rel.startswith(p.rstrip("/") + "/") for p in prefixes
        ):
            continue
        blob = tree_b / rel
        hunks = _hunks(d.diff if isinstance(d.diff, bytes) else b"")
        items.append(
            SourceItem(
                rel,
                lang,
                (lambda b=blob: b.data_stream.read()),
                blob.size,
                module=_git_module(tree_b, rel),
                changed=hunks,
                windows=[(max(1, s - window), e + window, (s + e) // 2) for s, e in hunks],
            )
        )
    return items, cb.hexsha


def _git_module(tree, rel: str) -> str | None:
    if not rel.endswith(".py"):
        return None
    parts = rel[:-3].split("/")
    mod = [parts[-1]] if parts[-1] != "__init__" else []
    for i in range(len(parts) - 1, 0, -1):
        try:
            tree / ("/".join(parts[:i]) + "/__init__.py")
        except KeyError:
            break
        mod.insert(0, parts[i - 1])
    return ".".join(mod) or None

"""Path and revision checks shared by the CLI, the MCP server and the launcher."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from .errors import InputError, PathEscapeError

_REV_OK = re.compile(r"^[A-Za-z0-9_./~^@{}-]{1,200}$")


def contained(path: str | os.PathLike[str], roots: Iterable[str | os.PathLike[str]]) -> Path:
    """Resolve ``path`` (symlinks included) and require it to lie inside one of ``roots``."""
    resolved = Path(path).expanduser().resolve()
    resolved_roots = [Path(r).expanduser().resolve() for r in roots]
    for root in resolved_roots:
        if resolved == root or resolved.is_relative_to(root):
            return resolved
    allowed = ", ".join(str(r) for r in resolved_roots) or "(none)"
    raise PathEscapeError(
        f"path {path} resolves to {resolved}, outside the allowed roots: {allowed}"
    )


def check_rev(rev: str) -> str:
    """Reject revisions that could be read as options or that hold shell/odd characters."""
    if not rev or rev.startswith("-") or not _REV_OK.match(rev) or ".." in rev.strip("."):
        raise InputError(f"invalid git revision {rev!r}: give a branch, tag or commit id")
    return rev


def split_rev_range(spec: str) -> tuple[str, str]:
    """'A..B' -> (A, B), both checked."""
    if spec.count("..") != 1 or "..." in spec:
        raise InputError(f"invalid revision range {spec!r}: expected REV_A..REV_B")
    a, b = spec.split("..")
    return check_rev(a), check_rev(b)


def under_run(file: str, cwd: str | None) -> str:
    """``file`` relative to a run's working directory where it lies under it (how a job's
    FILE:LINE is written for the run's own interventions), else as given."""
    root = str(Path(cwd or ".").resolve()).rstrip("/") + "/"
    return file[len(root) :] if file.startswith(root) else file

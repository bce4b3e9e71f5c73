"""A package taken from a source checkout: ``[runs.<x>.source] package = "deepspeed"``.

When a case names the package a run imports and the repository and revision it comes
from, every launch of that run gets a throwaway worktree of that revision (``git worktree
add --detach`` under the system's temporary directory, made once per process and removed
when it exits) first on ``PYTHONPATH``. Nothing is installed and the user's
environment, work tree and site-packages are never modified: only the launched process
sees the checkout. A rerun that sets ``PYTHONPATH`` itself (a bisection probe: another
commit of the same repository, in its own worktree) takes the place of this checkout.

Limits: pure-Python modules only come from the checkout; compiled extensions it would
build on install are not built here (a JIT-built op is built from the checkout's sources
when the package does that at import or first use).
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path

from ..errors import InputError
from ..records import RunSpec
from .history import open_repo, resolve
from .worktree import remove_worktree, scratch_root

_CHECKOUTS: dict[tuple[str, str], Path] = {}


def _remove_all() -> None:
    for (repo, _sha), path in list(_CHECKOUTS.items()):
        remove_worktree(open_repo(repo), path)
    _CHECKOUTS.clear()


def checkout(repo_path: str, rev: str, what: str) -> Path:
    """A worktree of ``rev`` for this process, made once and removed when it exits."""
    repo = open_repo(repo_path)
    sha = resolve(repo, rev, what)
    key = (str(Path(repo.common_dir).resolve()), sha)
    if key in _CHECKOUTS and _CHECKOUTS[key].is_dir():
        return _CHECKOUTS[key]
    path = scratch_root() / f"pkg-{sha[:12]}-{os.getpid()}"
    if path.exists():  # left by a killed process that had this id
        remove_worktree(repo, path)
    repo.git.worktree("prune")
    repo.git.worktree("add", "--detach", str(path), sha)
    if not _CHECKOUTS:
        atexit.register(_remove_all)
    _CHECKOUTS[key] = path
    return path


def package_on_path(run: RunSpec, env: dict[str, str]) -> Path:
    """Put a worktree of the run's package source first on ``env["PYTHONPATH"]``."""
    src = run.source
    assert src is not None and src.package
    if not src.rev:
        raise InputError(
            f"run {run.name!r} names package {src.package!r} but no revision "
            f"(runs.{run.name}.source.rev) to take it from"
        )
    path = checkout(src.repo, src.rev, f"run {run.name}'s package")
    if not (path / src.package).is_dir() and not (path / f"{src.package}.py").is_file():
        raise InputError(
            f"run {run.name!r}: package {src.package!r} is not at the top of {src.repo} at "
            f"{src.rev}"
        )
    old = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(path) + (os.pathsep + old if old else "")
    if (ext := extensions_dir(path)) is not None:
        env[EXTENSIONS_VAR] = ext
    return path


EXTENSIONS_VAR = "TORCH_EXTENSIONS_DIR"


NATIVE_SUFFIXES = frozenset({".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp"})


def holds_op_sources(tree: Path) -> bool:
    """Whether a tree holds native sources a package JIT-builds ops from (C++ or CUDA files,
    an ``op_builder``): a checkout of DeepSpeed does, a job's own Python package does not."""
    for _root, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if "op_builder" in dirs or any(Path(f).suffix in NATIVE_SUFFIXES for f in files):
            return True
    return False


def extensions_dir(checkout_path: Path) -> str | None:
    """Where a run importing the package from ``checkout_path`` JIT-builds its ops; None
    where the checkout holds no op sources (the ops it loads are the installed package's,
    and their one build is shared: a build per probe costs a compile each).

    torch keeps one build per op name in its extensions directory, so a checkout's build of
    an op (another revision's sources) would replace the user's own and break every later
    launch of the installed package. The checkout's builds live inside the checkout and go
    with it.
    """
    if not holds_op_sources(checkout_path):
        return None
    return str(checkout_path / ".torch_extensions")

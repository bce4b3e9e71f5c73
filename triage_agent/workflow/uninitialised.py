"""An origin no input explains, read as memory the job never wrote.

The trace's origin is an op whose recorded inputs are equal in both runs and whose outputs
differ. For an op that draws no randomness and reduces nothing across ranks, on equal
inputs, that leaves an input the digests did not see as the other run saw it: most often a
tensor from ``torch.empty`` (or ``empty_like``, ``new_empty``) that the op reads before
anything wrote it, whose bytes are whatever the allocator last left there. Each line of the
job that allocates that way, the origin's own file first, gives an arm: its allocations
zeroed in both runs (``fill-empty``). Every step matching proves the line reads memory it
never wrote; it is a bug there.

Limits: an allocation made inside a library on the job's behalf is not the job's line; the
job's files are read as they are on disk, up to :data:`MAX_FILES`.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from ..records import Case, Classification, Hypothesis
from .arms import Arm
from .structural import is_draw

MAX_FILES = 200
_EMPTY = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


def _sites(path: Path) -> list[int]:
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    return sorted(
        {
            n.lineno
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute | ast.Name)
            and (n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id) in _EMPTY
        }
    )


def _job_files(case: Case) -> list[Path]:
    roots = [Path(p) for p in (case.scan_paths or case.source_roots)]
    cwd = Path(case.run_b.cwd or ".")
    out: list[Path] = []
    for r in roots:
        r = r if r.is_absolute() else cwd / r
        if r.is_file() and r.suffix == ".py":
            out.append(r)
        elif r.is_dir():
            out += [p for p in sorted(r.rglob("*.py")) if ".venv" not in p.parts]
    return out[:MAX_FILES]


def empty_arms(case: Case, origin_name: str, origin_caller: str | None) -> list[Arm]:
    """``fill-empty`` arms, both runs, for the job's uninitialised allocations; none for an
    origin that draws or communicates."""
    op = origin_name.rsplit("::", 1)[-1]
    if is_draw(origin_name) or op.startswith(("c10d", "all_", "reduce", "broadcast")):
        return []
    first = Path(origin_caller.split(" ", 1)[0].rpartition(":")[0]) if origin_caller else None
    files = _job_files(case)
    files.sort(key=lambda p: (first is None or p.resolve() != first.resolve(), str(p)))
    cwd = Path(case.run_b.cwd or ".").resolve()
    arms: list[Arm] = []
    for path in files:
        for line in _sites(path):
            try:
                rel = path.resolve().relative_to(cwd)
            except ValueError:
                rel = path.resolve()
            site = f"{rel}:{line}"
            hid = "H-" + hashlib.sha256(f"fill-empty|{site}".encode()).hexdigest()[:10]
            arms.append(
                Arm(
                    hypothesis=Hypothesis(
                        id=hid,
                        statement=f"{site} allocates a tensor uninitialised and the job reads "
                        "it before writing all of it: its bytes are whatever the allocator "
                        "left, which differs from one process to the next",
                        category="nondeterminism",
                        rationale=f"the first differing op, {origin_name}, gives different "
                        "outputs on inputs recorded equal; zeroing what that line allocates, "
                        "in both runs, tests it",
                        classification=Classification.bug,
                    ),
                    intervention=f"fill-empty {site}",
                    run="both",
                    kind="nondeterminism",
                    location=site,
                )
            )
            if len(arms) == 3:
                return arms
    return arms

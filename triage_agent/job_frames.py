"""The job's own line behind a call: the innermost frame outside the libraries it goes
through (torch, numpy, this project, ...). Used by the code injected into the job's
processes to say which line of the job made a seeding, an in-place call or a load."""

from __future__ import annotations

import os
import sys

TORCH = os.sep + os.path.join("torch", "")
NUMPY = os.path.join("numpy", "")
DEEPSPEED = os.path.join("deepspeed", "")
PROJECT = "triage_agent"


def job_line(skip: tuple[str, ...], depth: int = 2) -> tuple[str, int] | None:
    """(file, line) of the innermost frame, ``depth`` frames above the caller's caller, whose
    file holds none of ``skip`` (and is not the standard ``random`` module)."""
    f = sys._getframe(depth)
    while f is not None:
        name = f.f_code.co_filename
        if not any(s in name for s in skip) and not name.endswith(os.sep + "random.py"):
            return name, f.f_lineno
        f = f.f_back
    return None


def job_stack(skip: tuple[str, ...], depth: int = 2) -> list[str]:
    """'file:line' of every frame above the caller's caller whose file holds none of
    ``skip``, innermost first: the job's path to a call, not only its nearest line."""
    out: list[str] = []
    f = sys._getframe(depth)
    while f is not None:
        name = f.f_code.co_filename
        if not any(s in name for s in skip) and not name.endswith(os.sep + "random.py"):
            out.append(f"{name}:{f.f_lineno}")
        f = f.f_back
    return out


def job_frames(skip: tuple[str, ...], depth: int = 2) -> list[tuple[str, str, int, int]]:
    """(file, function, its first line, the line) of each frame above the caller's caller
    whose file holds none of ``skip``, innermost first: the job's path with the functions it
    runs in (a caller's line shared with another path tells where two paths part)."""
    out = []
    f = sys._getframe(depth)
    while f is not None:
        co = f.f_code
        if not any(s in co.co_filename for s in skip):
            out.append((co.co_filename, co.co_name, co.co_firstlineno, f.f_lineno))
        f = f.f_back
    return out

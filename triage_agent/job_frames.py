"""The job's own line behind a call: the innermost frame outside the libraries it goes
through (torch, numpy, this project, ...). Used by the code injected into the job's
processes to say which line of the job made a seeding, an in-place call or a load."""

from __future__ import annotations

import os
import sys
from typing import Any

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


def at_site(site: str, where: tuple[str, int]) -> bool:
    """Whether ``where`` (file, line) is ``site``, a FILE:LINE as the job names it: a path
    relative to the job's directory (a code object's file may carry it as given, or whole),
    or absolute."""
    path, _, line = site.rpartition(":")
    name = os.path.normpath(where[0])
    return str(where[1]) == line and (
        name in (path, os.path.abspath(path))
        or name.endswith(os.sep + os.path.normpath(path).lstrip(os.sep))
    )


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


class JobFiles:
    """Whether a code object's file is the job's own: under the directory the process
    started in, and not in the interpreter's prefix (the standard library, site-packages) or
    this project. Cached by file name: a profile function asks for every call."""

    def __init__(self) -> None:
        self.root = os.path.realpath(os.getcwd()) + os.sep
        self.skip = (
            os.path.dirname(os.path.realpath(__file__)) + os.sep,
            os.path.realpath(sys.prefix) + os.sep,
            os.path.realpath(sys.base_prefix) + os.sep,
        )
        self.known: dict[str, bool] = {}

    def __call__(self, filename: str) -> bool:
        known = self.known.get(filename)
        if known is None:
            # '<frozen importlib._bootstrap>', '<string>': no file, and a relative-looking
            # name that would resolve under the start directory
            path = os.path.realpath(filename)
            known = self.known[filename] = (
                not filename.startswith("<")
                and path.startswith(self.root)
                and not path.startswith(self.skip)
            )
        return known


def returned_from(fn: Any, args: tuple, kwargs: dict, keep: Any) -> tuple[Any, str | None]:
    """``fn(*args, **kwargs)`` and 'file:line' of the last return, while it ran, of a frame
    ``keep(code)`` accepts: the line a function (or the job's code under it) returned from.
    A profile for the one call; the profile outside it is put back."""
    last: list[str] = []
    outer = sys.getprofile()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and keep(frame.f_code):
            last[:] = [f"{frame.f_code.co_filename}:{frame.f_lineno}"]

    sys.setprofile(profile)
    try:
        value = fn(*args, **kwargs)
    finally:
        sys.setprofile(outer)
    return value, (last[0] if last else None)


def profile_until_first_forward(
    profile: Any, on_stop: Any, pending: dict[str, list[Any]] | None = None
) -> None:
    """Run ``profile`` (a ``sys.setprofile`` function) from now until the first module
    forward begins, the end of initialisation, then call ``on_stop``: a profile over every
    Python call costs too much to leave on in the steps."""
    sys.setprofile(profile)

    def on_torch(torch: Any) -> None:
        handle: list[Any] = []

        def first_forward(module: Any, args: Any) -> None:
            sys.setprofile(None)
            handle[0].remove()
            on_stop()

        handle.append(torch.nn.modules.module.register_module_forward_pre_hook(first_forward))

    if "torch" in sys.modules:
        on_torch(sys.modules["torch"])
    elif pending is not None:
        pending.setdefault("torch", []).append(on_torch)
    else:
        from .import_hooks import on_import

        on_import({"torch": [on_torch]})

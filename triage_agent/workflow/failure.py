"""A failing run read from its logs: the exception, the innermost frame in code the job owns
or imports, and the traceback's frames; the source those frames point into, parsed."""

from __future__ import annotations

import ast
import re
import sysconfig
from functools import cache
from pathlib import Path

from pydantic import BaseModel, Field

from ..runs import RunOutcome

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>[\w<>.]+)')
_EXC = re.compile(r"(?:^|\s)(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b:?.*)$")


class Failure(BaseModel):
    run: str
    error: str
    file: str | None = None
    line: int | None = None
    function: str | None = None
    frames: list[str] = Field(
        default_factory=list, description="the traceback's frames, outermost first, file:line"
    )

    def site(self) -> str | None:
        return f"{self.file}:{self.line} ({self.function})" if self.file else None


def plumbing(file: str) -> bool:
    """Frames of torch itself, the standard library and the interpreter: where an error is
    raised on the job's behalf, not where the job's own code (or its framework) called it."""
    p = file.replace("\\", "/")
    stdlib = sysconfig.get_paths()["stdlib"].replace("\\", "/")
    return "/site-packages/torch/" in p or p.startswith(stdlib + "/") or p.startswith("<")


def failure_of(out: RunOutcome) -> Failure:
    """The failing run's innermost non-plumbing frame of the first traceback in its logs."""
    for log in out.logs:
        path = Path(log)
        if not path.is_file():
            continue
        frames: list[tuple[str, int, str]] = []
        for ln in path.read_text(errors="replace").splitlines():
            m = _FRAME.search(ln)
            if m:
                frames.append((m["file"], int(m["line"]), m["fn"]))
                continue
            e = _EXC.search(ln.strip())
            if frames and e and "Traceback" not in ln:
                mine = [f for f in frames if not plumbing(f[0])] or frames
                file, line, fn = mine[-1]
                return Failure(
                    run=out.run,
                    error=e["exc"][:200],
                    file=file,
                    line=line,
                    function=fn,
                    frames=[f"{f}:{n}" for f, n, _ in frames][-40:],
                )
    return Failure(run=out.run, error=out.error or f"exit codes {out.exit_codes}")


@cache
def source_tree(path: str) -> ast.Module | None:
    """The parsed source a frame points into; None where it cannot be read or parsed."""
    try:
        return ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None

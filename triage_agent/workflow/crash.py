"""One run fails where the other completes: the failure is the outcome to report.

A crash (or a timeout) of one baseline is a divergence of its own: the workflow reads the
Python traceback the failing run left in its logs, names the innermost frame in code the
job owns or imports (not torch's or the standard library's plumbing), and records it.

Where a run fails is not yet why: an exception is raised where a broken invariant is
noticed, which may be far downstream of the code that broke it (a state fragment linked
too early is found missing only when it is read). So the verdict is ``unknown``, the
failure site named as the first divergence observed, until an intervention that makes the
failing run complete and match proves a cause.
"""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

from pydantic import BaseModel

from ..ledger import Ledger
from ..records import Classification, EvidenceKind, EvidenceResult, Verdict
from ..runs import RunOutcome
from .fixcheck import relaunch_evidence

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>[\w<>.]+)')
_EXC = re.compile(r"(?:^|\s)(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b:?.*)$")


class Failure(BaseModel):
    run: str
    error: str
    file: str | None = None
    line: int | None = None
    function: str | None = None

    def site(self) -> str | None:
        return f"{self.file}:{self.line} ({self.function})" if self.file else None


def _plumbing(file: str) -> bool:
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
                mine = [f for f in frames if not _plumbing(f[0])] or frames
                file, line, fn = mine[-1]
                return Failure(run=out.run, error=e["exc"][:200], file=file, line=line, function=fn)
    return Failure(run=out.run, error=out.error or f"exit codes {out.exit_codes}")


def report_failure(ledger: Ledger, failed: RunOutcome, other: RunOutcome) -> Verdict:
    """Record that one run fails where the other completes, and the unknown verdict naming
    the failure site."""
    f = failure_of(failed)
    where = f.site()
    ev = ledger.add_evidence(
        relaunch_evidence(
            [failed, other],
            EvidenceKind.metrics,
            result=EvidenceResult.observed,
            summary=f"run {failed.run.upper()} fails where run {other.run.upper()} completes: "
            f"{f.error}" + (f" at {where}" if where else ""),
            data={"failing_run": failed.run, "failure": f.model_dump(), "logs": failed.logs},
        )
    )
    v = Verdict(
        classification=Classification.unknown,
        statement=f"run {failed.run.upper()} fails ({f.error})"
        + (f" at {where}" if where else "")
        + f"; run {other.run.upper()} completes. The failure site is where the failure is "
        "noticed, not necessarily what caused it",
        location=where,
        evidence=[ev.id],
        next_action=(
            f"read the code at {where} and what feeds it; " if where else "read the failing log; "
        )
        + f"a cause is proven by an intervention that makes run {failed.run.upper()} complete "
        f"and match run {other.run.upper()} (triage intervene)",
    )
    ledger.set_verdict(v)
    return v


def failed_baseline(outs: tuple[RunOutcome, RunOutcome]) -> tuple[RunOutcome, RunOutcome] | None:
    """(failed, completed) when exactly one baseline failed; None when both ran or both
    failed (a case that cannot run at all is an input error, not a divergence)."""
    a, b = outs
    if a.ok == b.ok:
        return None
    return (b, a) if a.ok else (a, b)

"""A proven setting read through the training counters it moves: a call only one run makes.

A declared difference (a flag that chooses another loop, a config key) can carry the whole
difference without being a numerical policy: the code it selects makes a call the other run
does not, and that call writes a counter training reads (an LR scheduler stepped twice per
step, a warm-up counter advanced by a helper). Both runs are rerun as they are, with a write
watch (:mod:`.write_recorder`) on the counters of the schedulers torch and DeepSpeed define;
each write is filed under the job's line that led to it (its innermost frame outside torch,
DeepSpeed and this tool) and the function that line called. A (counter, function) pair one
run writes through more often than the other is an extra writer; the test suppresses that
function where that line calls it, in that run, with every setting left as it is. If every
step then matches, the line is where the difference is made: a bug there, which the setting
only exposes.

Limits: only the counters named in :data:`COUNTERS` are watched (an attribute written with
``setattr``); a counter kept in a dict or a tensor is not seen.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from ..job_frames import DEEPSPEED, PROJECT, TORCH
from ..ledger import Ledger
from ..records import Case, Classification, Hypothesis
from .arms import Arm
from .write_recorder import GROUP_KEY, Frame, WatchReport, WatchTarget, WriteRecord
from .writer_watch import shown, watched

# training counters a call advances: the schedulers' positions, and the learning rate of
# each optimizer param group (which a scheduler or a callback of the job sets)
COUNTERS = (
    WatchTarget(module="torch.optim.optimizer", qualname="Optimizer", attrs=[GROUP_KEY + "lr"]),
    WatchTarget(module="torch.optim.lr_scheduler", qualname="LRScheduler", attrs=["last_epoch"]),
    WatchTarget(
        module="deepspeed.runtime.lr_schedules",
        qualname="WarmupLR",
        attrs=["last_batch_iteration"],
    ),
    WatchTarget(
        module="deepspeed.runtime.lr_schedules",
        qualname="OneCycle",
        attrs=["last_batch_iteration"],
    ),
    WatchTarget(
        module="deepspeed.runtime.lr_schedules",
        qualname="LRRangeTest",
        attrs=["last_batch_iteration"],
    ),
)
_LIBRARY = (
    TORCH,
    DEEPSPEED,
    PROJECT,
    "/site-packages/",
    "/dist-packages/",
    "<frozen",
    "<string>",
)


def _library(file: str, root: str | None) -> bool:
    """Not the job's own code: an installed package, or a file outside the run's directory
    (a package installed elsewhere, as ``pip --target`` puts one)."""
    if any(s in file for s in _LIBRARY):
        return True
    return root is not None and file.startswith("/") and not file.startswith(root)


def _job_turn(stack: list[Frame], root: str | None = None) -> tuple[Frame, Frame] | None:
    """(the job's innermost frame, the frame it called), innermost first in ``stack``; a
    write the job's own code makes is its own frame twice (the function that writes)."""
    if stack and not _library(stack[0].file, root):
        return stack[0], stack[0]
    for inner, frame in zip(stack, stack[1:], strict=False):
        if not _library(frame.file, root) and _library(inner.file, root):
            return frame, inner
    return None


def _writers(reports: list[WatchReport], cwd: str | None) -> Counter:
    """(rank, counter, called function) -> writes, and the job's lines behind each."""
    out: Counter = Counter()
    root = str(Path(cwd or ".").resolve()).rstrip("/") + "/"
    for rep in reports:
        for w in rep.writes:
            turn = _job_turn(w.stack, root)
            if turn is None:
                continue
            site, callee = turn
            out[
                (rep.rank, f"{w.cls}.{w.attr}", callee.module, callee.function, _site(site, cwd))
            ] += w.count
    return out


def _site(f: Frame, cwd: str | None) -> str:
    return f"{shown(f.file, cwd)}:{f.line}"


def called_alike(ca: Counter, cb: Counter, key: tuple) -> bool:
    """Whether the function behind ``key`` (rank, counter, module, function) writes another
    counter as often in both runs: a counter it writes on every call (a scheduler's position)
    says both runs call it alike, so the writes of ``key``'s counter that only one run makes
    are a decision it takes on values that differ (a plateau scheduler that lowers the rate
    in one run), not a call only one run makes. Suppressing it would test its decision, not
    the place the difference comes from."""
    rank, counter, mod, fn = key
    return any(
        k[0] == rank and k[2:] == (mod, fn) and k[1] != counter and n and cb.get(k) == n
        for k, n in ca.items()
    )


def extra_writers(
    a: list[WatchReport],
    b: list[WatchReport],
    cwd_a: str | None,
    cwd_b: str | None,
    decided: list[tuple[str, str, str, int, int]] | None = None,
) -> list[tuple[str, str, str, str, int, int, int | None]]:
    """(run, counter, module:function, the job's line, its writes, the other run's writes
    through that function, K when that line writes K times as often as the other run's
    lines do (:func:`_rate`)) for each counter written through a function more often in one
    run than in the other, on the lowest rank where that happens. Those the function writes
    on a decision both runs call it to take (:func:`called_alike`) go to ``decided`` as
    (run, counter, module:function, writes, the other run's writes) instead."""
    wa, wb = _writers(a, cwd_a), _writers(b, cwd_b)

    def by_callee(w: Counter) -> Counter:
        c: Counter = Counter()
        for key, n in w.items():
            c[key[:4]] += n
        return c

    ca, cb = by_callee(wa), by_callee(wb)
    out = []
    for run, mine, other, writes in (("b", cb, ca, wb), ("a", ca, cb, wa)):
        for key, n in sorted(mine.items()):
            if n <= other.get(key, 0):
                continue
            rank, counter, mod, fn = key
            if called_alike(ca, cb, key):
                if decided is not None:
                    decided.append((run, counter, f"{mod}:{fn}", n, other.get(key, 0)))
                continue
            theirs = wa if writes is wb else wb
            # the lines that write through it as often in both runs (its construction) are
            # no extra writers
            sites = [
                (s, m)
                for (r, c, md, f, s), m in writes.items()
                if (r, c, md, f) == key and theirs.get((r, c, md, f, s)) != m
            ]
            for site, _m in sorted(sites, key=lambda x: -x[1])[:2]:
                k = _rate(writes, theirs, key, site)
                out.append((run, counter, f"{mod}:{fn}", site, n, other.get(key, 0), k))
    return out


def _rate(mine: Counter, theirs: Counter, key: tuple, site: str) -> int | None:
    """K when ``site``'s writes through ``key``'s function are K >= 2 times the other run's
    writes through it, the lines both runs write through alike left out (a scheduler's
    constructor): a call made once per micro-batch where the other run makes it once per
    step. None when the counts are no such multiple."""
    ours = mine.get((*key, site), 0)
    alike = {k[4] for k, n in mine.items() if k[:4] == key and theirs.get(k) == n}
    rest = sum(n for k, n in theirs.items() if k[:4] == key and k[4] not in alike)
    if rest and ours % rest == 0 and ours // rest >= 2:
        return ours // rest
    return None


def writer_arms(
    case: Case,
    ledger: Ledger,
    proven: Hypothesis,
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> list[Arm]:
    """Both runs rerun under the counters' write watch; an arm for each extra writer. A
    reading already in the ledger (a resumed workflow) is read back, not launched again."""
    for n in reversed(ledger.state().notes):
        if n.get("writes_read") == proven.id:
            return [Arm.model_validate(a) for a in n.get("arms", [])]
    outs, reps = {}, {}
    for run in ("a", "b"):
        outs[run], reps[run] = watched(
            case, ledger, run, [], list(COUNTERS), timeout_s=timeout_s, on_status=on_status
        )
    if not (outs["a"].ok and outs["b"].ok):
        ledger.note(
            "the counters' write watch did not complete in both runs: no extra writer is read",
            level="warning",
        )
        return []
    decided: list[tuple[str, str, str, int, int]] = []
    found = extra_writers(reps["a"], reps["b"], case.run_a.cwd, case.run_b.cwd, decided)
    if not found:
        said = "; ".join(
            f"{callee} writes {counter} {n} time(s) in run {run.upper()} and {m} in the other, "
            "while both runs call it alike (another counter it writes on each call is "
            "written as often in both): a decision on values that differ, not an extra call"
            for run, counter, callee, n, m in decided[:2]
        )
        ledger.note(
            f"{proven.id} read through the training counters: "
            + (
                said
                or "every scheduler counter is written through the same functions as "
                "often in both runs"
            ),
            writes_read=proven.id,
            arms=[],
        )
        return []
    arms = []
    for run, counter, callee, site, n, m, k in found[:2]:
        module = callee.split(":")[0]
        if module in ("", "__main__"):
            continue  # a function of the launched script: nothing can patch it by name
        # a library function the job's line calls is suppressed there only; a function of
        # the job's own that writes the counter itself is suppressed where it is; a line
        # that calls it K times as often as the other run is brought to the other's rate
        own = not any(s in module.replace(".", "/") + "/" for s in ("torch/", "deepspeed/"))
        where = "" if own else f"@{site}"
        intervention = f"thin {callee}{where}={k}" if k else f"suppress {callee}{where}"
        if any(a.intervention == intervention and a.run == run for a in arms):
            continue  # another counter the same calls write
        rate = f", {k} times as often as the other run calls it" if k else ""
        statement = (
            f"run {run.upper()}'s call at {site} writes {counter} through {callee} ({n} writes "
            f"against the other run's {m}{rate}): the extra writes carry the difference that "
            f"{proven.statement.split(':')[0]} exposes"
        )
        test = (
            f"letting one call in {k} through where {site} calls {callee}"
            if k
            else f"suppressing {callee} where {site} calls it (or, the job's own function, "
            "wherever it runs)"
        )
        hid = (
            "H-"
            + hashlib.sha256(f"writer|{run}|{counter}|{callee}|{site}".encode()).hexdigest()[:10]
        )
        arms.append(
            Arm(
                hypothesis=Hypothesis(
                    id=hid,
                    statement=statement,
                    category="extra-call",
                    rationale=f"a write watch on {counter}: {n} writes through {callee} in run "
                    f"{run.upper()}, {m} in the other; tested by {test}, every setting as "
                    "the run has it",
                    classification=Classification.bug,
                ),
                intervention=intervention,
                run=run,
                kind="extra-call",
                location=site,
            )
        )
    ledger.note(
        f"{proven.id} read through the training counters: "
        + "; ".join(f"{a.run.upper()} {a.intervention}" for a in arms),
        writes_read=proven.id,
        arms=[a.model_dump(mode="json") for a in arms],
    )
    return arms


__all__ = ["COUNTERS", "WriteRecord", "extra_writers", "writer_arms"]

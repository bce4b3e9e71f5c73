"""Which of the job's own functions first makes another number from the same numbers.

A proven setting can reach training as a value no traced op computes: a learning-rate
factor, a loss scale or a step count worked out in plain Python (or in a tensor of a few
elements) by the job's own code and stored in an object the training ops read later. The op
trace then shows only that an op was handed another scalar from an object's state. Both runs
are launched once more with the small values of the job's functions recorded
(:mod:`triage_agent.call_values`); paired call by call (the same function, its n-th call),
the origin is the first call to return another number while every number it was handed
(its arguments, its closure, the globals its code names, the small attributes of the
objects among them) is equal in both runs: only a choice differs there (a dtype, a mode, a
name), and the function turned that choice into another value. Within that call, the first
line whose own locals differ from the other run's is where the choice enters the number.

Limits: only functions defined under a run's start directory are recorded, the first 500
calls of each and the first 400 changed lines of a call; a value read from anywhere else
(a file, an attribute of an attribute) is not an input the pairing sees, so a call whose
inputs are known incomplete (an argument none of whose parts is small) is never an origin.
"""

from __future__ import annotations

import json
import linecache
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..call_values import REPORT_PREFIX, numeric
from ..ledger import Ledger
from ..paths import under_run
from ..records import Case
from ..runs import LaunchChanges, materialize_both


class ValueOrigin(BaseModel):
    rank: int
    function: str
    file: str
    def_line: int
    call: int
    ret_a: str
    ret_b: str
    choices: dict[str, tuple[str, str]]
    line: int | None = None
    line_locals: dict[str, tuple[str, str]] = {}

    def site(self) -> str:
        return f"{self.file}:{self.line if self.line is not None else self.def_line}"


def shown(text: str) -> str:
    """A recorded value as a reader writes it: ``0.87", ``bfloat16 5.0``, ``'cpu'``."""
    kind, _, rest = text.partition(":")
    if kind == "f":
        return repr(float.fromhex(rest))
    if kind == "t":
        dtype, _, vals = rest.partition(":")
        nums = [repr(float.fromhex(v)) if "p" in v else v for v in vals.split(",") if v]
        shape = dtype[dtype.index("(") :] if "(" in dtype else ""
        name = dtype.split("(")[0]
        return f"{name} {nums[0] if shape == '()' and nums else nums}"
    return rest


def _reports(out_dir: str) -> dict[int, list[dict[str, Any]]]:
    """rank -> the calls of that rank's process that recorded the most."""
    best: dict[int, list[dict[str, Any]]] = {}
    for path in sorted(Path(out_dir).rglob(f"{REPORT_PREFIX}*.json")):
        try:
            rank = int(path.name.removeprefix(REPORT_PREFIX).split("-")[0])
            calls = json.loads(path.read_text()).get("calls", [])
        except (OSError, ValueError):
            continue
        if len(calls) > len(best.get(rank, [])):
            best[rank] = calls
    return best


def _key(fn: str, cwd: str | None) -> str:
    file, _, rest = fn.partition(":")
    return f"{under_run(file, cwd)}:{rest}"


def find_origin(
    calls_a: list[dict[str, Any]],
    calls_b: list[dict[str, Any]],
    *,
    rank: int = 0,
    cwd_a: str | None = None,
    cwd_b: str | None = None,
) -> ValueOrigin | None:
    """The first call of B (in the order calls returned) that returns another number than
    A's same call while every number it was handed is equal; None when there is none."""
    by_a = {(_key(c["fn"], cwd_a), c["i"]): c for c in calls_a}
    for cb in sorted((c for c in calls_b if "seq" in c), key=lambda c: c["seq"]):
        key = (_key(cb["fn"], cwd_b), cb["i"])
        ca = by_a.get(key)
        if ca is None or "seq" not in ca:
            continue
        ra, rb = ca.get("ret"), cb.get("ret")
        if ra is None or rb is None or ra == rb or not (numeric(ra) and numeric(rb)):
            continue
        if not (ca.get("complete") and cb.get("complete")):
            continue
        ins_a, ins_b = ca["in"], cb["in"]
        if set(ins_a) != set(ins_b):
            continue
        differ = {k: (ins_a[k], ins_b[k]) for k in ins_a if ins_a[k] != ins_b[k]}
        if any(numeric(a) or numeric(b) for a, b in differ.values()):
            continue  # a number handed in differs: the function receives the difference
        file, def_line, qualname = key[0].rsplit(":", 2)
        line, line_locals = None, {}
        for (la, ch_a, *_), (lb, ch_b, *_) in zip(ca["lines"], cb["lines"], strict=False):
            if la != lb:
                line = lb  # the calls took another path from here
                break
            moved = {
                k: (ch_a.get(k, ""), ch_b.get(k, ""))
                for k in sorted(set(ch_a) | set(ch_b))
                if ch_a.get(k) != ch_b.get(k)
            }
            if moved:
                line, line_locals = lb, moved
                break
        return ValueOrigin(
            rank=rank,
            function=qualname,
            file=file,
            def_line=int(def_line),
            call=cb["i"],
            ret_a=ra,
            ret_b=rb,
            choices=differ,
            line=line,
            line_locals=line_locals,
        )
    return None


class StateWrite(BaseModel):
    """The first small attribute of an object of the job's own classes that B writes with
    another value than A's same write (the same class, attribute and count)."""

    cls: str
    attr: str
    count: int
    site_a: str
    site_b: str
    value_a: str
    value_b: str

    def said(self) -> str:
        return (
            f"writes {self.cls}.{self.attr} = {shown(self.value_b)} (write {self.count + 1}; "
            f"A writes {shown(self.value_a)} at {self.site_a})"
        )


def _writes(calls: list[dict[str, Any]], cwd: str | None) -> list[tuple[int, str, str, str, str]]:
    """(order, class, attribute, value, file:line) of every change of a method's object's
    small attribute, in the order the lines ran."""
    out = []
    for c in calls:
        cls = c.get("cls")
        if cls is None:
            continue
        file = under_run(c["fn"].split(":", 1)[0], cwd)
        for line, changed, *rest in c["lines"]:
            for k, v in changed.items():
                if k.startswith("self.") and v:
                    out.append((rest[0] if rest else 0, cls, k[5:], v, f"{file}:{line}"))
    return sorted(out)


def find_write(
    calls_a: list[dict[str, Any]],
    calls_b: list[dict[str, Any]],
    *,
    cwd_a: str | None = None,
    cwd_b: str | None = None,
    within: Callable[[str, int], bool] = lambda file, line: True,
) -> StateWrite | None:
    """The first write of B (in the order B ran), at a line ``within`` accepts, of a small
    attribute that A's same write (class, attribute, count) gives another value. The two
    runs may run different code (two versions of a package): writes pair by what they
    write, not by where."""
    seen_a: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for _, cls, attr, v, site in _writes(calls_a, cwd_a):
        seen_a.setdefault((cls, attr), []).append((v, site))
    count: dict[tuple[str, str], int] = {}
    for _, cls, attr, v, site in _writes(calls_b, cwd_b):
        k = count.get((cls, attr), 0)
        count[(cls, attr)] = k + 1
        a = seen_a.get((cls, attr), [])
        if k >= len(a) or a[k][0] == v:
            continue
        file, _, line = site.rpartition(":")
        if not within(file, int(line)):
            continue
        return StateWrite(
            cls=cls, attr=attr, count=k, site_a=a[k][1], site_b=site, value_a=a[k][0], value_b=v
        )
    return None


def recorded(
    case: Case,
    ledger: Ledger,
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> tuple[dict[int, list], dict[int, list]] | None:
    """Both runs' small values, per rank (launched once; a second call reuses the runs)."""
    on_status("both runs with the small values of the job's functions recorded")
    out_a, out_b = materialize_both(
        case,
        Path(ledger.workspace),
        "values",
        timeout_s=timeout_s,
        changes=LaunchChanges(values=True, described=["record the job's small values"]),
    )
    if not (out_a.ok and out_b.ok):
        bad = out_a if not out_a.ok else out_b
        ledger.note(
            f"the runs with the job's small values recorded did not complete ({bad.error})",
            level="warning",
        )
        return None
    return _reports(out_a.out_dir), _reports(out_b.out_dir)


def said(o: ValueOrigin, cwd: str | None) -> str:
    """The origin in words, with the line's text where the source can be read."""
    choices = ", ".join(
        f"{k}: {shown(a)} vs {shown(b)}" for k, (a, b) in list(o.choices.items())[:3]
    )
    text = ""
    if o.line is not None:
        src = Path(cwd or ".") / o.file if not Path(o.file).is_absolute() else Path(o.file)
        text = linecache.getline(str(src), o.line).strip()
    at_line = ""
    if o.line is not None:
        moved = ", ".join(
            f"{k} {shown(a) or '(unset)'} vs {shown(b) or '(unset)'}"
            for k, (a, b) in list(o.line_locals.items())[:2]
        )
        at_line = f"; the first line whose own values differ is {o.file}:{o.line}" + (
            f" ({text}: {moved})" if text else f" ({moved})"
        )
    return (
        f"{o.function} ({o.file}:{o.def_line}), call {o.call} on rank {o.rank}, is handed the "
        f"same numbers in both runs and returns {shown(o.ret_a)} in A, {shown(o.ret_b)} in B; "
        f"what differs among its inputs is a choice ({choices or 'nothing recorded'})" + at_line
    )


def value_origin(
    case: Case,
    ledger: Ledger,
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> ValueOrigin | None:
    """Both runs launched with the job's small values recorded; the origin, noted in the
    ledger either way. A reading already in the ledger (a resumed workflow) is read back."""
    for n in reversed(ledger.state().notes):
        if "values_read" in n:
            got = n.get("origin")
            return ValueOrigin.model_validate(got) if got else None
    got = recorded(case, ledger, timeout_s=timeout_s, on_status=on_status)
    if got is None:
        ledger.note("no value origin read", values_read=True, origin=None)
        return None
    reps_a, reps_b = got
    origin = None
    for rank in sorted(set(reps_a) & set(reps_b)):
        origin = find_origin(
            reps_a[rank], reps_b[rank], rank=rank, cwd_a=case.run_a.cwd, cwd_b=case.run_b.cwd
        )
        if origin is not None:
            break
    calls = sum(len(c) for c in reps_b.values())
    ledger.note(
        f"the job's own functions' small values, both runs ({calls} calls recorded in B): "
        + (
            said(origin, case.run_b.cwd)
            if origin is not None
            else "no call returns another number from the same numbers"
        ),
        values_read=True,
        origin=origin.model_dump(mode="json") if origin is not None else None,
    )
    return origin


__all__ = [
    "StateWrite",
    "ValueOrigin",
    "find_origin",
    "find_write",
    "recorded",
    "said",
    "shown",
    "value_origin",
]

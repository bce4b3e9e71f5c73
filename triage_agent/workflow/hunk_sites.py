"""Where, in a proven set of hunks that spans many lines, the difference is made.

Bisecting two versions of a package ends at the smallest set of hunks whose revert gives
back A's bits. When those hunks are a refactoring that only runs as a whole (a method split
in two, a helper renamed with its callers), the set is proven and its first line says
little. Two observations, each a launch of both runs, name the line among the hunks:

- the first line that writes a small attribute of an object (a table of class weights, a
  scale, a counter) another value than A's same write (the same class, attribute and count),
  from the job's small values (:mod:`.value_origin`);
- else the line the first differing op of the trace (equal inputs, different outputs) is
  called from, where it lies among the hunks: the op is traced again at its step with its
  call recorded (a dump), as the setting reading does.

The hunks stay the proof; the line is where in them the values part. When neither
observation lands in the hunks, the location is the hunks', as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ..compare.classify import is_view_like
from ..evidence_data import TraceCompareData
from ..fingerprint import CaptureConfig
from ..ledger import Ledger
from ..paths import under_run
from ..records import Case, Evidence
from .characterize import MismatchReport
from .classify import ATOMIC_OPS, RANDOM_OPS, parse_op
from .fixcheck import SourceChange
from .setting_effect import FirstDivergence, _event_at, read_traces
from .stage2 import new_context, trace_and_compare
from .value_origin import find_write, recorded

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)


def hunk_lines(diffs: list[str]) -> dict[str, set[int]]:
    """B's file (as the tree names it) -> the lines the hunks give it."""
    out: dict[str, set[int]] = {}
    for text in diffs:
        file = None
        for line in text.splitlines():
            if line.startswith("+++ "):
                file = line[4:].removeprefix("b/").strip()
            elif file and (m := _HUNK.match(line)):
                start, count = int(m.group(1)), int(m.group(2) or 1)
                out.setdefault(file, set()).update(range(start, start + count))
    return out


def _placed(ledger: Ledger, found: SourceChange, site: str, said: str) -> SourceChange:
    where = f"{site} ({said}); {found.location}"
    ledger.note(f"within the proven hunks, {site}: {said}")
    hyp = ledger.update_hypothesis(
        found.hypothesis.id, rationale=f"{where}. {found.hypothesis.rationale}"
    )
    return found.model_copy(update={"hypothesis": hyp, "location": where})


def written_within(
    case: Case,
    ledger: Ledger,
    found: SourceChange,
    within: Callable[[str, int], bool],
    *,
    timeout_s: float,
    on_status: Callable[[str], None],
) -> SourceChange | None:
    """The first line among the hunks whose write of an object's small attribute differs
    from A's same write; None when there is none."""
    got = recorded(case, ledger, timeout_s=timeout_s, on_status=on_status)
    if got is None:
        return None
    reps_a, reps_b = got
    for rank in sorted(set(reps_a) & set(reps_b)):
        write = find_write(
            reps_a[rank], reps_b[rank], cwd_a=case.run_a.cwd, cwd_b=case.run_b.cwd, within=within
        )
        if write is not None:
            said = (
                f"the first line whose write of an object's state differs from A's: {write.said()}"
            )
            return _placed(ledger, found, write.site_b, said)
    return None


def op_site(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    trace_ev: Evidence,
    within: Callable[[str, int], bool],
    *,
    roles: tuple[str, ...] = ("origin",),
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None],
) -> tuple[str, FirstDivergence] | None:
    """B's call site (``file:line`` under B's directory) of the trace's first differing op
    (of one of ``roles``; not a view, a draw or an atomic reduction) where ``within``
    accepts it. The op is traced again at its step with its call recorded when the trace
    did not record it."""
    try:
        data = trace_ev.data_as(TraceCompareData)
    except TypeError:
        return None
    if data.level != "op" or set(data.trace_dirs) != {"a", "b"}:
        return None
    first_step = rep.diff.common_steps[0] if rep.diff.common_steps else 0
    d = read_traces(data.trace_dirs["a"], data.trace_dirs["b"], first_step)
    op = parse_op(d.name) if d is not None else None
    if d is None or d.role not in roles or op is None or is_view_like(d.name):
        return None
    if op.base in RANDOM_OPS or op.base in ATOMIC_OPS:
        return None
    structural = d.role == "structural"
    if structural and d.in_b is None:
        return None  # B executes nothing where the streams part: no op of B's to place
    name = d.in_b[1] if structural and d.in_b is not None else d.name
    caller = d.caller_b if structural else (d.caller_b or d.caller)
    if caller is None:
        ctx = new_context(
            case, ledger, rep, timeout_s=timeout_s, deadline=deadline, on_status=on_status
        )
        cfg = CaptureConfig(
            out_dir=Path(ledger.workspace) / "unused",
            steps=(max(d.step, 0), max(d.step, 0)),
            level="op",
            dump=[name],
            digest="both",
        )
        res, ev = trace_and_compare(ctx, cfg, "op site")
        if res is None:
            return None
        ledger.add_evidence(ev)
        e = _event_at(ev.data_as(TraceCompareData).trace_dirs["b"], d, "caller", b=structural)
        caller = getattr(e, "caller", None)
    if not caller:
        return None
    file, _, line = caller.rpartition(":")
    site = f"{under_run(file, case.run_b.cwd)}:{line}"
    if not line.isdigit() or not within(site.rpartition(":")[0], int(line)):
        return None
    return site, d


def op_site_within(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    found: SourceChange,
    trace_ev: Evidence,
    within: Callable[[str, int], bool],
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None],
) -> SourceChange | None:
    """The line among the hunks that the trace's first differing op (equal inputs,
    different outputs) is called from in B."""
    got = op_site(
        case,
        ledger,
        rep,
        trace_ev,
        within,
        roles=("origin", "structural"),
        timeout_s=timeout_s,
        deadline=deadline,
        on_status=on_status,
    )
    if got is None:
        return None
    site, d = got
    said = (
        f"the first op whose inputs are equal and whose outputs differ, {d.name} at rank "
        f"{d.rank} step {d.step} ({d.scope or '<root>'}), is called from this line"
        if d.role == "origin"
        else f"B's first op where the two runs' op streams part, "
        f"{d.in_b[1] if d.in_b else d.name} at rank {d.rank} step {d.step}, is called from "
        "this line"
    )
    return _placed(ledger, found, site, said)


def place_within(
    case: Case,
    ledger: Ledger,
    rep: MismatchReport,
    found: SourceChange,
    prefix: str,
    trace_ev: Evidence | None,
    *,
    timeout_s: float,
    deadline: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> SourceChange:
    """``found`` with its location led by the line among its hunks where the values part,
    when the hunks span more than one line and an observation lands in them."""
    lines = hunk_lines(found.diffs)
    if sum(len(v) for v in lines.values()) < 2:
        return found

    def within(file: str, line: int) -> bool:
        return line in lines.get(file.removeprefix(prefix + "/"), set())

    placed = written_within(case, ledger, found, within, timeout_s=timeout_s, on_status=on_status)
    if placed is None and trace_ev is not None:
        placed = op_site_within(
            case,
            ledger,
            rep,
            found,
            trace_ev,
            within,
            timeout_s=timeout_s,
            deadline=deadline,
            on_status=on_status,
        )
    if placed is None:
        ledger.note(
            "within the proven hunks no line writes an object's small value another than A's, "
            "nor calls the first differing op: the hunks stay the place"
        )
        return found
    return placed


__all__ = ["hunk_lines", "op_site", "op_site_within", "place_within", "written_within"]

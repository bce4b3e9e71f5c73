"""Exports: a Chrome trace / Perfetto JSON of two aligned runs, and a Markdown summary.

The trace view puts run A and run B in two processes, one thread per rank, one slice per
event. Native traces carry no timestamps, so time is the execution position (1 us per
event); paired events share a position, so a gap in one run shows where the other has
extra events. The first divergence, the origin and every unmatched event are marked with
instant events and a color. Limit: to keep the file loadable, only ``window`` events on
each side of each rank's first divergence are written (all of them when the rank is
smaller); the Markdown says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model import TraceRun
from .result import CompareResult, Divergence, EventRef, RankResult


def _slice(pid: int, tid: int, ts: int, e: Any, color: str | None = None) -> dict[str, Any]:
    ev = {
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": 1,
        "name": e.name,
        "cat": e.kind,
        "args": {
            "step": e.step,
            "scope": e.scope,
            "call": e.call,
            "seq": e.seq,
            "line": e.line,
            "inputs": list(e.inputs),
            "outputs": list(e.outputs),
        },
    }
    if color:
        ev["cname"] = color
    return ev


def _mark(pid: int, tid: int, ts: int, name: str, ref: EventRef) -> dict[str, Any]:
    return {
        "ph": "i",
        "s": "t",
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "name": name,
        "args": {"event": ref.name, "scope": ref.scope, "step": ref.step, "line": ref.line},
    }


def export_perfetto(
    result: CompareResult, a: TraceRun, b: TraceRun, out: str | Path, window: int = 2000
) -> Path:
    """Write the aligned trace view to ``out`` (Chrome trace JSON); returns the path."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": f"A {result.a.path}"}},
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": f"B {result.b.path}"}},
    ]
    for rr in result.ranks:
        if rr.rank not in a.ranks or rr.rank not in b.ranks:
            continue
        sa, sb = a.ranks[rr.rank], b.ranks[rr.rank]
        fd = rr.first_divergence
        centre = (fd.a.index if fd and fd.a else fd.other_index if False else 0) if fd else 0
        if fd and fd.a is None and fd.b is not None:
            centre = fd.b.index
        lo_a = max(0, centre - window)
        hi_a = min(len(sa), centre + window)
        marks = {
            "a": {u.event.index for u in rr.unmatched if u.event.run == "a"},
            "b": {u.event.index for u in rr.unmatched if u.event.run == "b"},
        }
        red = _divergent(rr.first_divergence, rr.origin)
        for pid, stream, run, lo, hi in (
            (1, sa, "a", lo_a, hi_a),
            (2, sb, "b", max(0, lo_a - window // 10), min(len(sb), hi_a + window // 10)),
        ):
            events.append(
                {
                    "ph": "M",
                    "pid": pid,
                    "tid": rr.rank,
                    "name": "thread_name",
                    "args": {"name": f"rank {rr.rank}"},
                }
            )
            for e in stream.events(lo, hi):
                color = None
                if (run, e.index) in red:
                    color = "terrible"
                elif e.index in marks[run]:
                    color = "yellow"
                events.append(_slice(pid, rr.rank, e.index, e, color))
        for d, label in ((rr.first_divergence, "first divergence"), (rr.origin, "origin")):
            if d is None:
                continue
            for pid, r in ((1, d.a), (2, d.b)):
                if r is not None:
                    events.append(_mark(pid, rr.rank, r.index, f"{label}: {d.role}", r))
        for u in rr.unmatched[:1000]:
            pid = 1 if u.event.run == "a" else 2
            events.append(_mark(pid, rr.rank, u.event.index, f"unmatched ({u.reason})", u.event))
    path = Path(out)
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
    return path


def _divergent(*ds: Divergence | None) -> set[tuple[str, int]]:
    out = set()
    for d in ds:
        if d is None:
            continue
        if d.a:
            out.add(("a", d.a.index))
        if d.b:
            out.add(("b", d.b.index))
    return out


def _where(r: EventRef | None) -> str:
    if r is None:
        return "—"
    return (
        f"`{r.name}` scope `{r.scope or '<root>'}` step {r.step} call {r.call} "
        f"(#{r.index}, {Path(r.file).name}:{r.line})"
    )


_ROLE_SAID = {
    "origin": "origin (inputs equal, outputs differ)",
    "receiver": "receiver (inputs already differ)",
    "extra": "event only B executes",
    "missing": "event only A executes",
    "observed": "difference observed (no input digests to tell origin from receiver)",
}


def headline(result: CompareResult, max_candidates: int = 3) -> str:
    """One paragraph for a ledger summary: what differs first, its role and call site.

    The earliest first-divergence candidates across ranks (events one run executes and the
    other does not, then the origin), or, with no candidate, the first difference and what
    to widen."""
    if result.status == "identical":
        text = f"traces identical on ranks {[r.rank for r in result.ranks]}"
        return text + ("" if result.complete else "; INCOMPLETE: " + "; ".join(result.warnings[:3]))
    cands = sorted(
        (c for r in result.ranks for c in r.candidates), key=lambda c: (c.step, c.rank, c.order)
    )
    parts = []
    if cands:
        shown = "; ".join(c.describe() for c in cands[:max_candidates])
        more = len(cands) - max_candidates
        parts.append(
            "first-divergence candidates in execution order: "
            + shown
            + (f"; and {more} more" if more > 0 else "")
        )
    origins = [r.origin for r in result.ranks if r.origin is not None]
    if not origins:
        firsts = [r.first_divergence for r in result.ranks if r.first_divergence is not None]
        first = min(firsts, key=lambda d: ((d.a or d.b).step, (d.a or d.b).index), default=None)
        if first is not None and first.role not in ("extra", "missing"):
            e = first.b or first.a
            parts.append(
                f"no origin on the traced events; the first difference is a "
                f"{_ROLE_SAID[first.role]} at rank {e.rank}: {e.kind} {e.where()}"
            )
    s = result.summary
    parts.append(
        f"origin ranks {s.origin_ranks or 'none'}, receiver-only ranks "
        f"{s.receiver_only_ranks or 'none'}"
    )
    if not result.complete:
        parts.append("INCOMPLETE: " + "; ".join(result.warnings[:3]))
    return "traces diverged: " + "; ".join(parts)


def _candidates_md(rr: RankResult) -> list[str]:
    """The first-divergence candidates of a rank, in execution order."""
    if not rr.candidates:
        return []
    more = rr.candidates_total - len(rr.candidates)
    lines = [
        "",
        "**First-divergence candidates** (execution order"
        + (
            f"; {len(rr.candidates)} of {rr.candidates_total} shown, state writers first"
            if more
            else ""
        )
        + "):",
        "",
        "| # | candidate | run | step | event | kind | call site | writes state |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, c in enumerate(rr.candidates, start=1):
        lines.append(
            f"| {n} | {c.kind} | {c.run.upper()} | {c.step} | `{c.event}` | {c.event_kind} | "
            f"{c.call_site or '—'} | {c.state_write or 'no'} |"
        )
    return lines


def to_markdown(result: CompareResult, max_unmatched: int = 20) -> str:
    """A review-ready summary: status, per-rank first divergence, labels, what to widen."""
    lines = [
        f"# Trace comparison: {result.status}" + ("" if result.complete else " (incomplete)"),
        "",
        f"- A: `{result.a.path}` ({result.a.fmt}, run `{result.a.run_id}`)",
        f"- B: `{result.b.path}` ({result.b.fmt}, run `{result.b.run_id}`)",
    ]
    if result.mapping:
        lines.append(f"- correspondence map: `{result.mapping}`")
    s = result.summary
    lines += [
        "",
        "## Across ranks",
        "",
        f"- origins on ranks: {s.origin_ranks or 'none'}",
        f"- receivers only: {s.receiver_only_ranks or 'none'}",
        f"- first candidate an event only one run executes: {s.unmatched_first_ranks or 'none'}",
        f"- identical: {s.identical_ranks or 'none'}",
        f"- equal as far as they go, a run stopped early: {s.incomplete_ranks or 'none'}",
    ]
    if s.unpaired_ranks:
        lines.append(f"- traced in one run only: {s.unpaired_ranks}")
    if s.note:
        lines.append(f"- {s.note}")
    for rr in result.ranks:
        lines += ["", f"## Rank {rr.rank}: {rr.status}", ""]
        lines.append(
            f"{rr.events_a} events in A, {rr.events_b} in B; {rr.matched} paired "
            f"({rr.alignment} alignment), {rr.differing} paired with different digests, "
            f"{rr.unmatched_total} unmatched."
        )
        for d, title in ((rr.first_divergence, "First divergence"), (rr.origin, "Origin")):
            if d is None or (title == "Origin" and d is rr.first_divergence):
                continue
            lines += [
                "",
                f"**{title}** ({d.role}):",
                "",
                f"- A: {_where(d.a)}",
                f"- B: {_where(d.b)}",
            ]
            if d.differing_inputs or d.differing_outputs:
                lines.append(
                    f"- differing inputs {d.differing_inputs}, outputs {d.differing_outputs}"
                )
            lines += [f"- **{lb.code}**: {lb.message}" for lb in d.labels]
        lines += _candidates_md(rr)
        if rr.first_receiver is not None and rr.first_receiver.producers:
            lines += ["", f"**First receiver** {_where(rr.first_receiver.b)}; upstream:", ""]
            lines += [f"- {p.describe()}" for p in rr.first_receiver.producers]
        if rr.origin is not None and rr.origin is rr.first_divergence:
            lines.append("")
            lines.append(
                "The first divergence is the candidate origin: inputs equal, outputs differ."
            )
        if rr.outside_scope:
            said = rr.outside_scope.sentences()
            lines += ["", f"No origin on the traced events; widen the capture. {said}"]
        if rr.artifacts:
            lines += ["", f"Probe artifacts set aside: {len(rr.artifacts)}"]
        if rr.unmatched:
            lines += [
                "",
                "| run | # | line | step | scope | name | reason |",
                "|---|---|---|---|---|---|---|",
            ]
            for u in rr.unmatched[:max_unmatched]:
                e = u.event
                lines.append(
                    f"| {e.run.upper()} | {e.index} | {e.line} | {e.step} | `{e.scope}` | "
                    f"`{e.name}` | {u.reason} |"
                )
            if rr.unmatched_total > max_unmatched:
                lines.append(f"\n… and {rr.unmatched_total - max_unmatched} more (see JSON).")
        lines += [f"- note: {n}" for n in rr.notes]
    if result.warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in result.warnings]
    return "\n".join(lines) + "\n"

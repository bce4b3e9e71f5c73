"""The state manifests a workflow captured, compared on request: run A against run B at one
step boundary, or what a resumed process rebuilt against what the saving process held.

The state capture (:mod:`triage_agent.boundary_capture`) leaves one record per process and
boundary under each launch's ``state/records``; this reads the newest launch's records of
each run in a workspace, picks the two asked for and diffs their manifests (tensors,
scalars, RNG streams, data cursors, settings), so a reader sees what a checkpoint holds and
what it lacks without opening the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .boundary_capture import read_reports
from .errors import InputError
from .manifest import BoundaryRecord, EntryDiff, diff_manifests
from .runs import STATE_RECORDS


class StateSide(BaseModel):
    run: str
    point: str
    rank: int
    pid: int
    file: str = Field(description="the record compared")


class StateComparison(BaseModel):
    a: StateSide
    b: StateSide
    equal: bool
    compared: int
    differing: int
    by_section: dict[str, int] = Field(description="differing entries per section")
    differences: list[EntryDiff] = Field(description="the first differing entries")
    only_in_a: list[str]
    only_in_b: list[str]
    points: dict[str, list[str]] = Field(description="the boundaries each run's records hold")


def _records(workspace: Path, run: str) -> list[tuple[Path, BoundaryRecord]]:
    dirs = sorted(
        (d for d in (workspace / "runs" / run).glob(f"*/{STATE_RECORDS}") if d.is_dir()),
        key=lambda d: d.stat().st_mtime,
    )
    if not dirs:
        return []
    d = dirs[-1]  # the newest launch that captured state
    files = sorted(d.glob("state-*.json"))
    recs = read_reports(d, "state-*.json", BoundaryRecord)
    by_name = {f.name: f for f in files}
    out = []
    for r in recs:
        name = next((n for n in by_name if f"-{r.point}-rank{r.rank}-pid{r.pid}" in n), "")
        out.append((by_name.get(name, d), r))
    return out


def _pick(recs: list[tuple[Path, BoundaryRecord]], point: str, rank: int, last: bool = True):
    found = [(f, r) for f, r in recs if r.point == point and r.rank == rank]
    return (found[-1] if last else found[0]) if found else None


def compare_state(
    workspace: Path,
    point: str,
    *,
    rank: int = 0,
    between: Literal["runs", "resume"] = "runs",
    run: Literal["a", "b"] = "b",
    limit: int = 30,
) -> StateComparison:
    """``runs``: A's record at ``point`` against B's. ``resume``: within ``run``, the saving
    process at ``point`` (its ``end-K`` when it has one, else ``after-K``) against the
    process that resumed from it (its ``after-K``)."""
    recs = {r: _records(workspace, r) for r in ("a", "b")}
    points = {r: sorted({x.point for _, x in recs[r]}) for r in recs}
    if not recs["a"] and not recs["b"]:
        raise InputError(
            f"no state records under {workspace}/runs: the baselines capture state when the "
            "workflow runs (run_workflow or confirm_mismatch with relaunch)"
        )
    if between == "runs":
        pa, pb = _pick(recs["a"], point, rank), _pick(recs["b"], point, rank)
        sides = [("a", pa), ("b", pb)]
    else:
        k = point.split("-", 1)[-1]
        mine = recs[run]
        pids = [r.pid for _, r in mine if r.point == f"after-{k}" and r.rank == rank]
        if len(set(pids)) < 2:
            raise InputError(
                f"run {run.upper()} has no resume at step {k} on rank {rank}: one process holds "
                f"after-{k} (boundaries it holds: {', '.join(points[run]) or 'none'})"
            )
        saver, resumer = pids[0], pids[-1]
        saved = [(f, r) for f, r in mine if r.pid == saver and r.rank == rank]
        pa = _pick(saved, f"end-{k}", rank) or _pick(saved, f"after-{k}", rank)
        pb = _pick([(f, r) for f, r in mine if r.pid == resumer], f"after-{k}", rank)
        sides = [(run, pa), (run, pb)]
    for name, side in sides:
        if side is None:
            raise InputError(
                f"run {name.upper()} holds no record of {point} on rank {rank}; its records "
                f"hold: {', '.join(points[name]) or 'none'}"
            )
    (fa, ra), (fb, rb) = (s for _, s in sides)  # type: ignore[misc]
    d = diff_manifests(ra.manifest, rb.manifest)
    by_section: dict[str, int] = {}
    for e in d.differences:
        by_section[e.section] = by_section.get(e.section, 0) + 1
    return StateComparison(
        a=StateSide(run=sides[0][0], point=ra.point, rank=ra.rank, pid=ra.pid, file=str(fa)),
        b=StateSide(run=sides[1][0], point=rb.point, rank=rb.rank, pid=rb.pid, file=str(fb)),
        equal=d.equal,
        compared=d.compared,
        differing=len(d.differences),
        by_section=by_section,
        differences=d.differences[:limit],
        only_in_a=d.only_in_a[:limit],
        only_in_b=d.only_in_b[:limit],
        points=points,
    )

"""Replicas that part: parameters the ranks of one run should hold alike and do not.

In data-parallel training every rank holds each parameter whole and updates it from the
same averaged gradient, so after each optimizer step the ranks' copies are equal. A
parameter whose copies differ across the ranks of one run, while the other run's ranks
agree on it, was updated from gradients that were not averaged across ranks: it was left
out of the synchronisation. That is a defect whatever the setting that led there (replicas
that drift are never a numerical policy), and it is read from the optimizer events two
traced runs already hold, per rank: no relaunch.

Only events that every rank of both runs records under one (step, parameter, call) are
read, and only where the other run's ranks agree: a ZeRO partition, which differs by
design, is never read as a split.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from .reader import read_native


class ReplicaSplit(BaseModel):
    """The parameters whose copies part across one run's ranks at the first step they do."""

    run: str = Field(description="the run whose ranks disagree")
    step: int
    params: list[str] = Field(description="the parameters, in the order the optimizer updates them")
    ranks: list[int]


def _updates(path: Path) -> dict[int, dict[tuple[int, str, int], tuple]]:
    """rank -> (step, parameter, call) -> the digests its optimizer event wrote."""
    run = read_native(path)
    out: dict[int, dict[tuple[int, str, int], tuple]] = {}
    for rank, stream in run.ranks.items():
        mine = out.setdefault(rank, {})
        for i in range(len(stream)):
            ev = stream.event(i)
            if ev.kind == "optimizer" and ev.outputs:
                mine[(ev.step, ev.name, ev.call)] = ev.outputs
    return out


def _parted(ups: dict[int, dict[tuple[int, str, int], tuple]], keys: set) -> set:
    ranks = sorted(ups)
    return {k for k in keys if len({ups[r][k] for r in ranks}) > 1}


def replica_split(trace_a: Path, trace_b: Path) -> ReplicaSplit | None:
    """The first step at which one run's ranks hold different copies of a parameter that the
    other run's ranks agree on; None when no such step is traced (or one rank is traced)."""
    try:
        ups = {"a": _updates(trace_a), "b": _updates(trace_b)}
    except (OSError, ValueError):
        return None
    if any(len(u) < 2 for u in ups.values()) or sorted(ups["a"]) != sorted(ups["b"]):
        return None
    shared = set.intersection(*(set(k) for u in ups.values() for k in u.values()))
    parted = {run: _parted(u, shared) for run, u in ups.items()}
    for run, other in (("b", "a"), ("a", "b")):
        only = parted[run] - parted[other]
        if not only:
            continue
        step = min(k[0] for k in only)
        first = [k for k in only if k[0] == step]
        ranks = sorted(ups[run])
        order = [k for k in ups[run][ranks[0]] if k in first]  # the optimizer's order
        return ReplicaSplit(
            run=run, step=step, params=list(dict.fromkeys(k[1] for k in order)), ranks=ranks
        )
    return None

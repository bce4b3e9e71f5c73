"""Producer links: for each differing input of a receiver, the earlier event that wrote it.

A receiver's input differs because something upstream wrote different bytes. Within one run
and rank, the producer of an input is the last event before the receiver with an output of
the same digest signature (dtype, shape, digest). Following producers from the first
receiver walks the data flow upstream: to an event only one run executed (a stray optimizer
step that rewrote a weight), to an artifact, or to the edge of the capture (no producer: the
value came from outside the traced events or from before the window).

Limits: the search looks back at most ``MAX_LOOKBACK`` events per run, since each decoded
event costs ~15 us; equal bytes written by two events are attributed to the later one, which
for views and copies is the right hop upstream.
"""

from __future__ import annotations

from pathlib import Path

from .classify import ref
from .model import Ev, RankStream
from .result import Producer

MAX_LOOKBACK = 50_000
_BATCH = 512


def find_producers(
    stream: RankStream,
    receiver: Ev,
    inputs: list[int],
    run: str,
    rank: int,
    source: Path,
    limit: int = MAX_LOOKBACK,
) -> list[Producer]:
    """The producer in ``stream`` of each input position in ``inputs`` of ``receiver``."""
    todo = {
        k: receiver.inputs[k]
        for k in inputs
        if k < len(receiver.inputs) and receiver.inputs[k] is not None
    }
    found: dict[int, tuple[Ev, int]] = {}
    lo = max(0, receiver.index - limit)
    hi = receiver.index
    searched = 0
    while todo and hi > lo:
        start = max(lo, hi - _BATCH)
        for e in reversed(stream.events(start, hi)):
            searched += 1
            for k, sig in list(todo.items()):
                if sig in e.outputs:
                    found[k] = (e, e.outputs.index(sig))
                    del todo[k]
            if not todo:
                break
        hi = start
    out = []
    for k in inputs:
        sig = receiver.inputs[k] if k < len(receiver.inputs) else None
        hit = found.get(k)
        out.append(
            Producer(
                input=k,
                run=run,  # type: ignore[arg-type]
                digest=sig,
                event=ref(hit[0], run, rank, source) if hit else None,
                output=hit[1] if hit else None,
                searched=searched,
            )
        )
    return out

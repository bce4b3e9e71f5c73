"""Producer links: for each differing input of a receiver, the earlier event that wrote it.

A receiver's input differs because something upstream wrote different bytes. Within one run
and rank, the producer of an input is the last event before the receiver with an output of
the same digest signature (dtype, shape, digest). Following producers from the first
receiver walks the data flow upstream: to an event only one run executed (a stray optimizer
step that rewrote a weight), to an artifact, or to the edge of the capture (no producer: the
value came from outside the traced events or from before the window).

Limits: the search looks back at most ``MAX_LOOKBACK`` events per run. Each decoded event
costs ~15 us, so a native file is searched for the digest's bytes first and only the lines
holding it are decoded; equal bytes written by two events are attributed to the later one,
which for views and copies is the right hop upstream.
"""

from __future__ import annotations

from pathlib import Path

from .classify import ref
from .model import Ev, RankStream
from .result import Producer

MAX_LOOKBACK = 50_000


def _digest_text(sig: str) -> str:
    """The part of a digest signature ('float32[4x4]:ab12/cd34') that a trace line holds
    verbatim: the digest itself."""
    return sig.partition("]:")[2].partition("/")[0] or sig


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
    decoded: dict[int, Ev] = {}  # inputs searched one after the other share decodes
    for k, sig in todo.items():
        # only the events whose line holds the digest are decoded (a native file is
        # searched byte-wise); the latest one with it among its outputs is the producer
        for i in stream.may_contain(_digest_text(sig), lo, hi):
            e = decoded.get(i)
            if e is None:
                e = decoded[i] = stream.event(i)
            if sig in e.outputs:
                found[k] = (e, e.outputs.index(sig))
                break
    # events a backward walk looks at until it has found them all (or the whole window)
    if not todo:
        searched = 0
    elif len(found) == len(todo):
        searched = hi - min(e.index for e, _ in found.values())
    else:
        searched = hi - lo
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

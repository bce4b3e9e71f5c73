"""Megatron-LM rank-local determinism traces: ``rank_XXXXXX.jsonl``.

Each record observes one tensor at a named boundary: ``{event, iteration, microbatch, name,
occurrence, phase, rank, sequence, tensor}``. Mapped to events as step = iteration,
scope = ``mb{microbatch}``, name = ``{event}:{name}``, call = occurrence, outputs =
(tensor,), ordered by ``sequence`` (execution order, never by semantic key).

Limit: a record carries no input digests, so a first mismatch is where the difference was
first observed, not a proven origin (role ``observed``).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import MalformedTraceError
from ..model import MemoryRankStream, TraceRun
from ._jsonl import records
from ._util import files_in, make_events, sigs

FILE_RE = re.compile(r"^rank_(\d+)\.jsonl(\.gz)?$")
_REQUIRED = ("event", "iteration", "name", "sequence", "tensor")
_PHASES = {"forward", "backward", "optimizer"}


def load(path: Path) -> TraceRun:
    files = files_in(path, FILE_RE)
    if not files:
        raise MalformedTraceError(f"{path}: no rank_XXXXXX.jsonl files")
    warnings: list[str] = []
    ranks = {}
    for f in files:
        m = FILE_RE.match(f.name)
        file_rank = int(m.group(1)) if m else None
        rows = []
        rank = file_rank
        for ln, rec in records(f, warnings):
            if not isinstance(rec, dict):
                raise MalformedTraceError(f"{f}:{ln}: expected a JSON object")
            missing = [x for x in _REQUIRED if x not in rec]
            if missing:
                raise MalformedTraceError(f"{f}:{ln}: record lacks {', '.join(missing)}")
            if not isinstance(rec["sequence"], int) or not isinstance(rec["iteration"], int):
                raise MalformedTraceError(f"{f}:{ln}: sequence and iteration must be integers")
            r = rec.get("rank", rank)
            if r is not None and type(r) is not int:
                raise MalformedTraceError(f"{f}:{ln}: rank must be an integer")
            occurrence = rec.get("occurrence")
            if occurrence is not None and type(occurrence) is not int:
                raise MalformedTraceError(f"{f}:{ln}: occurrence must be an integer")
            if rank is None:
                rank = r
            elif r is not None and r != rank:
                raise MalformedTraceError(f"{f}:{ln}: rank {r} inside the file of rank {rank}")
            mb = rec.get("microbatch")
            phase = rec.get("phase")
            rows.append(
                {
                    "seq": rec["sequence"],
                    "step": rec["iteration"],
                    "kind": "module",
                    "name": f"{rec['event']}:{rec['name']}",
                    "scope": f"mb{mb}" if mb is not None else "",
                    "call": occurrence,
                    "phase": phase if isinstance(phase, str) and phase in _PHASES else "other",
                    "outputs": sigs([rec["tensor"]]),
                    "meta": {"phase": phase},
                    "line": ln,
                }
            )
        rows.sort(key=lambda r: r["seq"])
        has_occ = all(r["call"] is not None for r in rows)
        rank = rank if rank is not None else len(ranks)
        ranks[rank] = MemoryRankStream(rank, f, make_events(rows, count_calls=not has_occ), {})
    return TraceRun(
        path=path,
        fmt="megatron-lm",
        run_id=path.name,
        world_size=None,
        ranks=ranks,
        warnings=warnings,
        records_inputs=False,
    )

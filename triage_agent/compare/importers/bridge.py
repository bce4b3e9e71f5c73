"""Megatron-Bridge determinism streams: ``stream_pp{pp}_tp{tp}_cp{cp}_dp{dp}.fp``.

One JSONL file per logical rank; a ``{"_header": {...}}`` line first (coordinates, parallel
sizes), then records ``{seq_id, window, op, group, align_idx, scope, caller, input,
output}`` keyed across runs by (window, group, op, align_idx). Mapped to events as
step = window, scope = group, name = op, call = align_idx; the enclosing module goes to
``meta.module``. Ranks are numbered by sorted logical coordinates, never by the physical
rank (the same logical GPU lands on different nodes per job).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import MalformedTraceError
from ..model import MemoryRankStream, TraceRun
from ._jsonl import records
from ._util import files_in, make_events, sigs

FILE_RE = re.compile(r"^stream_pp(\d+)_tp(\d+)_cp(\d+)_dp(\d+)\.fp(\.gz)?$")
_REQUIRED = ("window", "op", "group", "align_idx")


def load(path: Path) -> TraceRun:
    files = files_in(path, FILE_RE)
    if not files:
        raise MalformedTraceError(f"{path}: no stream_pp*_tp*_cp*_dp*.fp files")
    coords = []
    for f in files:
        m = FILE_RE.match(f.name)
        coords.append(tuple(int(x) for x in m.groups()[:4]) if m else (0, 0, 0, 0))
    order = sorted(range(len(files)), key=lambda k: coords[k])
    warnings: list[str] = []
    ranks = {}
    world = None
    for rank, k in enumerate(order):
        f = files[k]
        header: dict = {}
        rows = []
        for ln, rec in records(f, warnings):
            if not isinstance(rec, dict):
                raise MalformedTraceError(f"{f}:{ln}: expected a JSON object")
            if "_header" in rec:
                header = rec["_header"] if isinstance(rec["_header"], dict) else {}
                continue
            missing = [x for x in _REQUIRED if x not in rec]
            if missing:
                raise MalformedTraceError(f"{f}:{ln}: record lacks {', '.join(missing)}")
            if not isinstance(rec["align_idx"], int):
                raise MalformedTraceError(f"{f}:{ln}: align_idx must be an integer")
            if "seq_id" in rec and (
                not isinstance(rec["seq_id"], int) or isinstance(rec["seq_id"], bool)
            ):
                raise MalformedTraceError(f"{f}:{ln}: seq_id must be an integer")
            rows.append(
                {
                    "seq": rec.get("seq_id", len(rows)),
                    "step": rec["window"] if isinstance(rec["window"], int) else 0,
                    "kind": "op" if rec["group"] == "aten" else "collective",
                    "name": str(rec["op"]),
                    "scope": str(rec["group"]),
                    "call": rec["align_idx"],
                    "caller": rec.get("caller"),
                    "inputs": sigs(rec.get("input")),
                    "outputs": sigs(rec.get("output")),
                    "meta": {"module": rec.get("scope")},
                    "line": ln,
                }
            )
        rows.sort(key=lambda r: r["seq"])
        events = make_events(rows, count_calls=False)
        hdr = {"coords": dict(zip(("pp", "tp", "cp", "dp"), coords[k], strict=True)), **header}
        world = header.get("world_size", world)
        ranks[rank] = MemoryRankStream(rank, f, events, hdr)
    return TraceRun(
        path=path,
        fmt="bridge",
        run_id=path.name,
        world_size=world,
        ranks=ranks,
        warnings=warnings,
    )

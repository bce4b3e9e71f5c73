"""Chrome trace-event JSON (optionally gzipped) whose op events carry per-op signatures.

The form OpGuard publishes its traces in: complete (``ph: "X"``) op events with
``args.io.inputs`` / ``args.io.outputs`` signature lists, a run and a rank per event
(``args.run`` / ``args.rank``, else the process name and the thread id), two runs as two
processes. Execution order within a rank is ``ts``, ties broken by file order. ``step``
comes from ``args.step`` (or ``args.iteration``), the scope from ``args.scope`` (or
``args.module``).

Limits: events without an ``io`` signature (counters, metadata, plain spans) are not
comparable and are counted in a warning, never silently dropped.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from ..errors import MalformedTraceError
from ..model import MemoryRankStream, TraceRun
from ._util import GZIP_ERRORS, JSON_ERRORS, loads, make_events, sigs


def _read(path: Path) -> Any:
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return loads(raw)
    except json.JSONDecodeError as exc:
        raise MalformedTraceError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})"
        ) from None
    except GZIP_ERRORS as exc:
        raise MalformedTraceError(f"{path}: cannot read ({exc})") from None
    except JSON_ERRORS as exc:
        raise MalformedTraceError(f"{path}: not valid JSON ({exc})") from None


def _pid(e: dict[str, Any], k: int, path: Path) -> int | str | None:
    pid = e.get("pid")
    if pid is not None and not isinstance(pid, int | str):
        raise MalformedTraceError(f"{path}: traceEvents[{k}]: pid must be an integer or a string")
    return pid


def load(path: Path) -> list[TraceRun]:
    """Every run in the file, in order of first appearance."""
    doc = _read(path)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise MalformedTraceError(f"{path}: no traceEvents list")
    proc_names: dict[Any, str] = {}
    for k, e in enumerate(events):
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_name":
            meta = e.get("args")
            pid = _pid(e, k, path)
            proc_names[pid] = str(meta.get("name", pid) if isinstance(meta, dict) else pid)
    per: dict[str, dict[int, list[dict[str, Any]]]] = {}
    skipped = 0
    for k, e in enumerate(events):
        if not isinstance(e, dict):
            raise MalformedTraceError(f"{path}: traceEvents[{k}] is not an object")
        if e.get("ph") == "M":
            continue
        args = e.get("args") or {}
        io = args.get("io") if isinstance(args, dict) else None
        if not isinstance(io, dict):
            skipped += 1
            continue
        if "name" not in e:
            raise MalformedTraceError(f"{path}: traceEvents[{k}] has io but no name")
        pid = _pid(e, k, path)
        run = str(args.get("run", proc_names.get(pid, "run" if pid is None else pid)))
        rank = args.get("rank", e.get("tid", 0))
        if not isinstance(rank, int):
            raise MalformedTraceError(f"{path}: traceEvents[{k}]: rank must be an integer")
        ts = e.get("ts", 0)
        if not isinstance(ts, int | float):
            raise MalformedTraceError(f"{path}: traceEvents[{k}]: ts must be a number")
        step = args.get("step", args.get("iteration", 0))
        per.setdefault(run, {}).setdefault(rank, []).append(
            {
                "ts": ts,
                "seq": k,
                "step": step if isinstance(step, int) else 0,
                "kind": str(args.get("kind", "op")),
                "name": str(e["name"]),
                "scope": str(args.get("scope", args.get("module", "")) or ""),
                "inputs": sigs(io.get("inputs")),
                "outputs": sigs(io.get("outputs")),
                "meta": {"ts": e.get("ts"), "dur": e.get("dur")},
                "line": k,  # position in traceEvents: the JSON has no useful line numbers
            }
        )
    if not per:
        raise MalformedTraceError(f"{path}: no op events with args.io signatures")
    runs = []
    for run, by_rank in per.items():
        ranks = {}
        for rank, rows in sorted(by_rank.items()):
            rows.sort(key=lambda r: (r["ts"], r["seq"]))
            for r in rows:
                if r["kind"] not in ("op", "module", "collective", "optimizer", "metric"):
                    r["kind"] = "op"
            ranks[rank] = MemoryRankStream(rank, path, make_events(rows), {})
        warnings = (
            [f"{path}: {skipped} trace events carry no io signature and were not compared"]
            if skipped
            else []
        )
        runs.append(
            TraceRun(
                path=path,
                fmt="chrome",
                run_id=run,
                world_size=None,
                ranks=ranks,
                warnings=warnings,
                label=run,
            )
        )
    return runs

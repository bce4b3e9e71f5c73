"""Measure the MCP layer's own cost: start-up, one call's round trip, concurrent appends.

    python benchmarks/mcp_server.py [--events 1000] [--calls 200] [--concurrency 20]

Prints one JSON object. It measures the adapter (validation, thread hop, serialisation,
ledger fold), not the library work behind a tool: ``ledger_summary`` over a ledger of
``--events`` notes, ``add_note`` appends from ``--concurrency`` concurrent calls, and the
time from spawning ``triage-mcp`` over stdio to its tool list. Not a test: no thresholds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path and its own name would
# shadow the installed ``mcp_server`` package: drop that entry before importing it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from mcp_server.security import Workspace  # noqa: E402
from mcp_server.server import build_server  # noqa: E402


async def _bench(root: Path, events: int, calls: int, concurrency: int) -> dict[str, float]:
    ws = Workspace(root)
    for i in range(events):
        ws.ledger.note(f"n{i}")
    out: dict[str, float] = {}
    async with Client(build_server(ws)) as c:
        lat = []
        for _ in range(calls):
            t0 = time.perf_counter()
            r = await c.call_tool("ledger_summary", {})
            lat.append(time.perf_counter() - t0)
            assert not r.is_error
        out["ledger_summary_median_ms"] = statistics.median(lat) * 1e3
        out["ledger_summary_p95_ms"] = sorted(lat)[int(0.95 * len(lat)) - 1] * 1e3
        sem = anyio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with sem:
                await c.call_tool("add_note", {"text": f"c{i}"})

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(calls):
                tg.start_soon(one, i)
        dt = time.perf_counter() - t0
        out["concurrent_add_note_per_s"] = calls / dt
        out["ledger_events_after"] = float(ws.ledger.state().events)
    exe = shutil.which("triage-mcp") or str(Path(sys.executable).parent / "triage-mcp")
    t0 = time.perf_counter()
    async with Client(StdioServerParameters(command=exe, args=["--workspace", str(root)])) as c:
        await c.list_tools()
    out["stdio_startup_to_tool_list_s"] = time.perf_counter() - t0
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python benchmarks/mcp_server.py")
    p.add_argument("--events", type=int, default=1000)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=20)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        res = anyio.run(_bench, Path(d), a.events, a.calls, a.concurrency)
    print(json.dumps({k: round(v, 3) for k, v in res.items()} | vars(a), indent=1))


if __name__ == "__main__":
    main()

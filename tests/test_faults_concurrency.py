"""One workspace, several writers at once: two MCP sessions (each its own `triage-mcp`
over stdio) appending concurrently while `triage run` works the same case. No line of the
ledger is interleaved or lost, and each side reads what the others recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_mcp_support import make_workspace, run_async
from test_mcp_transports import _triage_mcp

from triage_agent.ledger import Ledger

NOTES = 20  # per session, 5 in flight at a time


def _session(ws, tag: str, got: dict, seen: dict):
    params = StdioServerParameters(
        command=_triage_mcp(), args=["--workspace", str(ws)], cwd=str(ws), env=dict(os.environ)
    )

    async def go(others_done: anyio.Event, mine_done: anyio.Event) -> None:
        async with Client(params, read_timeout_seconds=300) as c:
            assert not (await c.call_tool("open_case", {})).is_error
            h = await c.call_tool(
                "record_hypothesis", {"statement": f"{tag} hypothesis", "category": "casts"}
            )
            assert not h.is_error, h.content
            got[tag] = [h.structured_content["hypothesis"]["id"]]
            limit = anyio.CapacityLimiter(5)

            async def note(k: int) -> None:
                async with limit:
                    r = await c.call_tool("add_note", {"text": f"{tag}-note-{k}"})
                    if not r.is_error:
                        got[tag].append(f"{tag}-note-{k}")

            async with anyio.create_task_group() as tg:
                for k in range(NOTES):
                    tg.start_soon(note, k)
            mine_done.set()
            await others_done.wait()  # then read what every writer recorded
            res = await c.read_resource("triage://ledger")
            seen[tag] = res.contents[0].text

    return go


def test_two_sessions_and_triage_run_share_one_ledger(tmp_path):
    ws = make_workspace(tmp_path)
    run = subprocess.Popen(
        [sys.executable, "-m", "triage_agent.cli.app", "run", "--budget-minutes", "5"],
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    got: dict[str, list[str]] = {}
    seen: dict[str, str] = {}

    async def main() -> None:
        a_done, b_done = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_session(ws, "sa", got, seen), b_done, a_done)
            tg.start_soon(_session(ws, "sb", got, seen), a_done, b_done)

    run_async(main)
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-2000:]

    path = ws / ".triage" / "ledger.jsonl"
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # ends with a newline: no torn tail
    records = [json.loads(ln) for ln in lines[:-1]]  # every line is one whole record
    st = Ledger(ws / ".triage").state()
    assert st.torn_tail is None and st.events == len(records)
    texts = [str(r["data"].get("text", "")) for r in records if r["kind"] == "note"]
    for tag in ("sa", "sb"):
        notes = [t for t in got[tag] if "-note-" in t]
        assert len(notes) == NOTES
        assert all(texts.count(t) == 1 for t in notes), tag  # none lost, none twice
        assert got[tag][0] in st.hypotheses
    # the workflow's own records are there too, beside the sessions'
    assert st.verdict is not None and any(e.kind.value == "static" for e in st.evidence)
    assert len([r for r in records if r["kind"] == "case"]) == 1  # one case, not three
    # each session read the other's records, and the run's (what it saw after all ended)
    for tag, other in (("sa", "sb"), ("sb", "sa")):
        assert f"{other}-note-{NOTES - 1}" in seen[tag] and got[other][0] in seen[tag]
    # the CLI reads the sessions' records
    show = subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "ledger", "show"],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert show.returncode == 0 and got["sa"][0] in show.stdout and got["sb"][0] in show.stdout

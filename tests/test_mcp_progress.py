"""Progress notifications as a real client receives them from `triage-mcp` over stdio."""

from __future__ import annotations

from mcp import Client
from test_mcp_support import TRAIN_SRC, make_workspace, run_async, stdio_params


def test_mcp_scan_progress_names_every_file_it_scanned(tmp_path):
    """Files scanned faster than the notification throttle are still named: a held report's
    message travels with the next one, and what is held at the end is sent before the result."""
    ws = make_workspace(tmp_path)
    (ws / "src" / "loop.py").write_text(TRAIN_SRC)
    (ws / "src" / "util.py").write_text("def f(x):\n    return x + 1\n")
    messages: list[str] = []
    values: list[float] = []

    async def on_progress(done, total, message):
        values.append(done)
        messages.append(message or "")

    async def go():
        async with Client(stdio_params(ws), read_timeout_seconds=120) as c:
            return await c.call_tool("scan", {"paths": ["src"]}, progress_callback=on_progress)

    res = run_async(go)
    assert not res.is_error, res.content
    scanned = res.structured_content["result"]["files_scanned"]
    assert scanned == 3
    said = " ".join(messages)
    missing = [f for f in ("train.py", "loop.py", "util.py") if f not in said]
    assert not missing, (missing, messages)
    assert "scan complete" in messages[-1]
    assert values == sorted(values)


def test_mcp_scan_progress_held_back_at_a_budget_is_still_sent(tmp_path):
    """A scan stopped by its file budget ends short of its total: that last report is sent
    (flushed when the tool returns), not swallowed by the throttle."""
    ws = make_workspace(tmp_path)
    (ws / "src" / "loop.py").write_text(TRAIN_SRC)
    messages: list[str] = []

    async def on_progress(done, total, message):
        messages.append(message or "")

    async def go():
        async with Client(stdio_params(ws), read_timeout_seconds=120) as c:
            return await c.call_tool(
                "scan",
                {"paths": ["src"], "max_files": 1, "record": False},
                progress_callback=on_progress,
            )

    res = run_async(go)
    assert not res.is_error, res.content
    assert res.structured_content["result"]["budget_hit"]
    assert "1-file budget reached" in messages[-1], messages

"""Real clients over real transports: `triage-mcp` as a subprocess on stdio and on HTTP."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from test_mcp_support import LOWP_SRC, make_workspace, run_async

from triage_agent.ledger import Ledger


def _triage_mcp() -> str:
    exe = shutil.which("triage-mcp") or os.path.join(os.path.dirname(sys.executable), "triage-mcp")
    assert os.path.exists(exe), "triage-mcp console script is not installed"
    return exe


def test_mcp_stdio_subprocess_session(tmp_path):
    """A real client starts `triage-mcp` over stdio and walks scan -> hypothesis ->
    reproducer -> ledger on a small case; what it saw is what the ledger on disk holds."""
    ws = make_workspace(tmp_path)
    (ws / "src" / "acc.py").write_text(LOWP_SRC)
    params = StdioServerParameters(
        command=_triage_mcp(), args=["--workspace", str(ws)], cwd=str(ws)
    )

    async def go():
        out = {}
        async with Client(params, read_timeout_seconds=300) as c:
            out["opened"] = await c.call_tool("open_case", {})
            out["confirmed"] = await c.call_tool("confirm_mismatch", {})
            out["scan"] = await c.call_tool("scan", {"max_files": 50})
            testable = [
                f for f in out["scan"].structured_content["result"]["findings"] if f["reproducer"]
            ]
            assert testable, out["scan"].structured_content
            f = testable[0]
            out["hyp"] = await c.call_tool(
                "record_hypothesis",
                {
                    "statement": f["rationale"],
                    "category": f["category"],
                    "findings": [f["id"]],
                    "reproducer": f["reproducer"],
                },
            )
            hid = out["hyp"].structured_content["hypothesis"]["id"]
            gen = await c.call_tool("generate_reproducer", {"finding": f["id"]})
            assert not gen.is_error, gen.content
            out["ev"] = await c.call_tool(
                "launch_reproducer", {"id": gen.structured_content["id"], "hypotheses": [hid]}
            )
            out["escape"] = await c.call_tool("open_case", {"path": "../../etc/passwd"})
            out["summary"] = await c.call_tool("ledger_summary", {})
        return hid, out

    hid, out = run_async(go)
    assert not out["opened"].is_error, out["opened"].content
    assert out["confirmed"].structured_content["report"]["step"] == 3
    assert not out["ev"].is_error, out["ev"].content
    assert out["ev"].structured_content["kind"] == "reproducer"
    assert out["escape"].is_error and "outside the allowed roots" in out["escape"].content[0].text
    summary = out["summary"].structured_content
    (row,) = summary["hypotheses"]
    assert row["id"] == hid and row["evidence"] == 1
    st = Ledger(ws / ".triage").state()
    assert hid in st.hypotheses and st.case.name == "toy"
    assert len(st.findings) == out["scan"].structured_content["recorded"] >= 1
    assert [e.kind.value for e in st.evidence] == ["metrics", "reproducer"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mcp_http_loopback_with_bearer_token(tmp_path):
    ws = make_workspace(tmp_path)
    port, token = _free_port(), "t0ken-" + "x" * 26
    env = {**os.environ, "TRIAGE_MCP_TOKEN": token}
    argv = [_triage_mcp(), "--workspace", str(ws), "--transport", "http", "--port", str(port)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None:
                pytest.fail(f"triage-mcp exited: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.2)
        url = f"http://127.0.0.1:{port}/mcp"

        async def go():
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            async with create_mcp_http_client() as raw:
                anon = await raw.post(url, json=ping)
                rebound = await raw.post(
                    url,
                    json=ping,
                    headers={"Authorization": f"Bearer {token}", "Host": "attacker.example"},
                )
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            async with http, Client(streamable_http_client(url, http_client=http)) as c:
                summary = await c.call_tool("ledger_summary", {})
            return anon.status_code, rebound.status_code, summary

        status, rebound, summary = run_async(go)
        assert status == 401
        assert rebound in (400, 403, 421)  # DNS-rebinding protection stays on behind the token
        assert not summary.is_error and summary.structured_content["events"] == 0
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_mcp_http_refuses_non_loopback_host(tmp_path):
    env = {**os.environ, "TRIAGE_MCP_TOKEN": "x" * 32}
    argv = [_triage_mcp(), "--workspace", str(tmp_path), "--transport", "http", "--host", "0.0.0.0"]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "loopback" in r.stderr
    assert "Traceback" not in r.stderr


def test_mcp_http_needs_token(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRIAGE_MCP_TOKEN"}
    argv = [_triage_mcp(), "--workspace", str(tmp_path), "--transport", "http"]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "TRIAGE_MCP_TOKEN" in r.stderr


def test_mcp_bad_workspace_or_case_file_is_one_line(tmp_path):
    (tmp_path / "triage.toml").write_text("[case\nname=")
    for argv in (
        ["--workspace", str(tmp_path / "missing")],
        ["--workspace", str(tmp_path)],
        ["--workspace", str(tmp_path), "--case", "/etc/hostname"],
    ):
        r = subprocess.run(
            [_triage_mcp(), *argv],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr and r.stderr.strip().count("\n") == 0
        assert r.stderr.startswith("triage-mcp: error: ")

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
from test_mcp_support import make_workspace, run_async

from triage_agent.ledger import Ledger


def _triage_mcp() -> str:
    exe = shutil.which("triage-mcp") or os.path.join(os.path.dirname(sys.executable), "triage-mcp")
    assert os.path.exists(exe), "triage-mcp console script is not installed"
    return exe


def test_mcp_stdio_subprocess_session(tmp_path):
    """A real client starts `triage-mcp` over stdio and walks the workflow on a small case."""
    ws = make_workspace(tmp_path)
    params = StdioServerParameters(
        command=_triage_mcp(), args=["--workspace", str(ws)], cwd=str(ws)
    )

    async def go():
        async with Client(params, read_timeout_seconds=120) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            opened = await c.call_tool("open_case", {})
            confirmed = await c.call_tool("confirm_mismatch", {})
            if "scan" in names:
                scan = await c.call_tool("scan", {"max_files": 50})
                assert not scan.is_error, scan.content
            hyp = await c.call_tool(
                "record_hypothesis",
                {"statement": "loss bits differ from step 3", "category": "rng"},
            )
            escape = await c.call_tool("open_case", {"path": "../../etc/passwd"})
            summary = await c.call_tool("ledger_summary", {})
            return opened, confirmed, hyp, escape, summary

    opened, confirmed, hyp, escape, summary = run_async(go)
    assert not opened.is_error, opened.content
    assert confirmed.structured_content["report"]["step"] == 3
    assert confirmed.structured_content["confirmed"] is True
    assert escape.is_error and "outside the allowed roots" in escape.content[0].text
    hid = hyp.structured_content["hypothesis"]["id"]
    assert [h["id"] for h in summary.structured_content["hypotheses"]] == [hid]
    # What the client saw is what the ledger on disk holds.
    st = Ledger(ws / ".triage").state()
    assert hid in st.hypotheses and st.case.name == "toy" and len(st.evidence) >= 1


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

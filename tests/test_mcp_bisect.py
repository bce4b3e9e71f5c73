"""`bisect_source` through a real MCP client talking to `triage-mcp` over stdio.

The case's job imports a small library from a checkout on ``PYTHONPATH``; run B uses a
later tag, one of whose two commits changes the bits. The tool bisects to it with
progress notifications, refuses a flag-like revision and a repository outside the roots,
and a second call resumes from the ledger without launching anything.
"""

from __future__ import annotations

import os
import shutil
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_bisect_support import ONE_BAD, make_case, probe_launches, write_case_toml
from test_mcp_support import assert_refused, run_async

from triage_agent.ledger import Ledger


def _triage_mcp() -> str:
    exe = shutil.which("triage-mcp") or os.path.join(os.path.dirname(sys.executable), "triage-mcp")
    assert os.path.exists(exe), "triage-mcp console script is not installed"
    return exe


def test_mcp_bisect_source_over_stdio(tmp_path):
    case = make_case(tmp_path, ONE_BAD[3:], pythonpath=True)
    write_case_toml(case, tmp_path / "triage.toml")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    params = StdioServerParameters(
        command=_triage_mcp(), args=["--workspace", str(tmp_path)], cwd=str(tmp_path)
    )
    progress: list[tuple[float, float | None, str | None]] = []

    async def go():
        out = {}
        async with Client(params, read_timeout_seconds=600) as c:
            out["tool"] = {t.name: t for t in (await c.list_tools()).tools}["bisect_source"]
            out["flag"] = await c.call_tool("bisect_source", {"range": "--exec=x..v-b"})
            out["repo"] = await c.call_tool("bisect_source", {"repo": str(outside)})
            out["cmd"] = await c.call_tool("bisect_source", {"command": "ls"})

            async def on_progress(done, total, message):
                progress.append((done, total, message))

            out["run"] = await c.call_tool(
                "bisect_source", {"timeout_s": 300}, progress_callback=on_progress
            )
            out["again"] = await c.call_tool("bisect_source", {})
        return out

    out = run_async(go)
    tool = out["tool"]
    assert tool.annotations.open_world_hint and not tool.annotations.read_only_hint
    assert set(tool.input_schema["properties"]) == {
        "repo",
        "range",
        "hunks",
        "budget_minutes",
        "timeout_s",
    }
    assert_refused(
        out, {"flag": "invalid git revision", "repo": "outside the allowed roots", "cmd": "command"}
    )
    r = out["run"]
    assert not r.is_error, r.content
    sc = r.structured_content
    assert sc["status"] == "found" and sc["mode"] == "pythonpath"
    assert sc["first_bad"]["subject"] == "ops: sigmoid form of tanh"
    (hunk,) = sc["hunks"]
    assert hunk["hunk"]["location"] == "lib/ops.py:7" and "torch.sigmoid" in hunk["hunk"]["diff"]
    assert sc["proof"]["outcome"] == "good" and "for the reader" in sc["message"]
    # each probe ran B with the library from its own worktree, first on PYTHONPATH
    assert len(probe_launches(tmp_path)) == sc["reruns"] >= 3
    # notifications name the probes, their values only grow, the last one is complete
    said = " ".join(m or "" for _, _, m in progress)
    assert "bisect:" in said and "proof:" in said
    assert [p[0] for p in progress] == sorted(p[0] for p in progress)
    assert progress[-1][0] == progress[-1][1] == len(sc["probes"])
    again = out["again"].structured_content
    assert again["reruns"] == 0 and again["reused"] == len(again["probes"])
    assert again["proof"]["evidence_id"] == sc["proof"]["evidence_id"]
    st = Ledger(case.workspace).state()
    assert st.hypotheses[sc["hypothesis"]].status.value == "supported"
    assert {q["evidence_id"] for q in sc["probes"]} <= {e.id for e in st.evidence}

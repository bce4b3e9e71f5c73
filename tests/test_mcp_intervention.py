"""`rerun_with_intervention` through a real MCP client talking to `triage-mcp` over stdio.

The case's run B nudges one weight at step 2 (``--perturb-at 2``); setting that launch flag
back makes every step match A, while an unrelated change leaves step 2 differing. What the
client is told is what the ledger on disk holds.
"""

from __future__ import annotations

import os
import shutil
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_mcp_support import assert_refused, make_relaunch_workspace, run_async

from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind


def _triage_mcp() -> str:
    exe = shutil.which("triage-mcp") or os.path.join(os.path.dirname(sys.executable), "triage-mcp")
    assert os.path.exists(exe), "triage-mcp console script is not installed"
    return exe


def test_mcp_rerun_with_intervention_over_stdio(tmp_path):
    ws = make_relaunch_workspace(tmp_path)
    params = StdioServerParameters(
        command=_triage_mcp(), args=["--workspace", str(ws)], cwd=str(ws)
    )

    async def go():
        out = {}
        async with Client(params, read_timeout_seconds=300) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            out["tool"] = tools["rerun_with_intervention"]
            out["hyp"] = await c.call_tool(
                "record_hypothesis",
                {"statement": "the --perturb-at flag changes B", "category": "config"},
            )
            hid = out["hyp"].structured_content["hypothesis"]["id"]
            call = "rerun_with_intervention"
            out["fixed"] = await c.call_tool(
                call, {"run": "b", "interventions": ["config --perturb-at=-1"], "hypotheses": [hid]}
            )
            out["wrong"] = await c.call_tool(
                call, {"run": "b", "interventions": ["env OMP_NUM_THREADS=1"], "hypotheses": [hid]}
            )
            out["bad"] = await c.call_tool(call, {"run": "b", "interventions": ["bogus X=1"]})
            out["code"] = await c.call_tool(
                call, {"run": "b", "interventions": ["env LD_PRELOAD=/tmp/x.so"]}
            )
            out["revert"] = await c.call_tool(call, {"run": "b", "interventions": ["revert a.py"]})
            out["empty"] = await c.call_tool(call, {"run": "b", "interventions": []})
        return out

    out = run_async(go)
    tool = out["tool"]
    assert tool.annotations.open_world_hint and not tool.annotations.read_only_hint
    assert "interventions" in tool.input_schema["properties"]
    fixed = out["fixed"]
    assert not fixed.is_error, fixed.content
    sc = fixed.structured_content
    assert sc["line"] == "all 4 steps match" and sc["match"]["all_match"] is True
    assert sc["result"] == "supported" and sc["changed"] == ["launch flag --perturb-at=-1"]
    assert sc["argv"][0][-1] == "--perturb-at=-1" and sc["seconds"] > 0
    wrong = out["wrong"].structured_content
    assert wrong["line"] == "first differing step 2" and wrong["result"] == "refuted"
    assert_refused(
        out,
        {
            "bad": "unknown kind 'bogus'",
            "code": "selects code to run",
            "revert": "use the revert_file tool",
            "empty": "interventions",
        },
    )
    reruns = [e for e in Ledger(ws / ".triage").state().evidence if e.kind == EvidenceKind.rerun]
    assert [e.id for e in reruns] == [sc["evidence_id"], wrong["evidence_id"]]
    assert reruns[0].data.rerun["commands"] == sc["argv"]
    assert reruns[0].result.value == "supported" and reruns[1].result.value == "refuted"

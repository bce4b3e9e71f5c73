"""`compare_boundaries` through a real MCP client talking to `triage-mcp` over stdio.

The captures are real: small bf16 DeepSpeed jobs on CPU (the jobs of test_correspond),
ZeRO 1 against ZeRO 2 under a wrapper (every boundary matches) and against ZeRO 2 with
weight decay only on the matrices (the master weights differ from step 0, the policy named).
"""

from __future__ import annotations

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_correspond import _jobs
from test_mcp_bisect import _triage_mcp
from test_mcp_support import assert_refused, run_async

from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind


def test_mcp_compare_boundaries_over_stdio(tmp_path):
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    _jobs(
        dumps,
        {
            "z1": (1, "all", "plain", 0.0),
            "z2": (2, "all", "wrap", 0.0),
            "z2m": (2, "matrices", "plain", 0.0),
        },
    )
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    params = StdioServerParameters(
        command=_triage_mcp(), args=["--workspace", str(tmp_path)], cwd=str(tmp_path)
    )

    async def go():
        out = {}
        async with Client(params, read_timeout_seconds=300) as c:
            out["tool"] = {t.name: t for t in (await c.list_tools()).tools}["compare_boundaries"]
            call = c.call_tool
            out["same"] = await call(
                "compare_boundaries", {"a_dir": "dumps/z1", "b_dir": "dumps/z2"}
            )
            out["diff"] = await call(
                "compare_boundaries", {"a_dir": "dumps/z1", "b_dir": str(dumps / "z2m")}
            )
            out["outside"] = await call(
                "compare_boundaries", {"a_dir": str(outside), "b_dir": "dumps/z1"}
            )
            out["missing"] = await call(
                "compare_boundaries", {"a_dir": "dumps/nope", "b_dir": "dumps/z1"}
            )
            out["notcap"] = await call("compare_boundaries", {"a_dir": ".", "b_dir": "dumps/z1"})
            out["cmd"] = await call(
                "compare_boundaries", {"a_dir": "dumps/z1", "b_dir": "dumps/z2", "command": "ls"}
            )
            out["nodirs"] = await call("compare_boundaries", {})
            out["dirs_and_align"] = await call(
                "compare_boundaries", {"a_dir": "dumps/z1", "b_dir": "dumps/z2", "align": True}
            )
        return out

    out = run_async(go)
    tool = out["tool"]
    assert not tool.annotations.read_only_hint and not tool.annotations.open_world_hint
    assert set(tool.input_schema["properties"]) == {
        *("a_dir", "b_dir", "hypotheses"),
        *("align", "interventions", "max_reruns", "max_minutes"),
    }

    assert not out["same"].is_error, out["same"].content
    same = out["same"].structured_content
    assert [r["verdict"] for r in same["table"]["rows"]] == ["match"] * 5
    assert same["table"]["first"] is None and same["table"]["steps"] == 3
    assert "deepspeed vs deepspeed boundary grads: match" in same["verdicts"]
    m = same["mapping"]
    assert m["pairs_total"] == 7 and not m["unmapped_a"] and not m["unmapped_b"]
    assert {"a": "fc.weight", "b": "module.fc.weight"} in [
        {"a": p["a"], "b": p["b"]} for p in m["pairs"]
    ]

    assert not out["diff"].is_error, out["diff"].content
    diff = out["diff"].structured_content
    rows = {r["boundary"]: r for r in diff["table"]["rows"]}
    assert rows["master_weights"]["verdict"] == "differs"
    assert rows["master_weights"]["first_step"] == 0
    assert rows["outputs"]["verdict"] == "differs" and rows["outputs"]["first_step"] == 1
    policy = "optimizer setting 'weight_decay' per tensor"
    assert rows["master_weights"]["policy"] == policy
    assert f"deepspeed vs deepspeed boundary master_weights: differs ({policy})" in diff["verdicts"]

    assert_refused(
        out,
        {
            "outside": "outside the allowed roots",
            "missing": "does not exist",
            "notcap": "side.json",
            "cmd": "command",
            "nodirs": "name both capture directories",
            "dirs_and_align": "name no directories",
        },
    )
    for name in ("outside", "missing", "notcap"):
        assert len(out[name].content[0].text.strip().splitlines()) == 1

    # both comparisons are manifest evidence the report shows; the refusals recorded nothing
    evs = {e.id: e for e in Ledger(tmp_path / ".triage").state().evidence}
    assert set(evs) == {same["evidence_id"], diff["evidence_id"]}
    d = evs[diff["evidence_id"]]
    assert d.kind == EvidenceKind.manifest and policy in d.summary
    assert d.data.after_step is None and d.data.records["b"] == "dumps/z2m"
    assert any("master_weights: differs" in s for s in d.data.differences)
    s = evs[same["evidence_id"]]
    assert s.data.after_step == 2 and s.data.differences == []
    assert [a.path for a in s.artifacts] == [str(dumps / n / "side.json") for n in ("z1", "z2")]

"""Stage 2 through MCP on a real relaunchable case: baselines, capture, compare, divergence."""

from __future__ import annotations

import json

from mcp import Client
from test_mcp_support import make_relaunch_workspace, run_async

from mcp_server.security import Workspace
from mcp_server.server import build_server
from triage_agent.records import EvidenceKind


def test_mcp_relaunch_capture_compare_first_divergence(tmp_path):
    ws = Workspace(make_relaunch_workspace(tmp_path))

    async def go():
        async with Client(build_server(ws)) as c:
            out = {}
            out["no_flag"] = await c.call_tool("confirm_mismatch", {})
            out["confirm"] = await c.call_tool("confirm_mismatch", {"relaunch": True})
            for run in ("a", "b"):
                out[run] = await c.call_tool(
                    "capture_trace",
                    {"run": run, "first_step": 1, "last_step": 2, "level": "module"},
                )
            ta = out["a"].structured_content["trace_dir"]
            tb = out["b"].structured_content["trace_dir"]
            out["compare"] = await c.call_tool("compare_traces", {"trace_a": ta, "trace_b": tb})
            out["first"] = await c.call_tool("first_divergence", {"trace_a": ta, "trace_b": tb})
            out["traces"] = (await c.read_resource("triage://traces")).contents[0].text
            return out

    out = run_async(go)
    assert out["no_flag"].is_error and "relaunch=true" in out["no_flag"].content[0].text
    assert not out["confirm"].is_error, out["confirm"].content
    assert out["confirm"].structured_content["report"]["step"] == 2
    for run in ("a", "b"):
        r = out[run]
        assert not r.is_error, r.content
        assert r.structured_content["exit_codes"] == [0]
        assert r.structured_content["trace_dir"].startswith(str(ws.root))
    cmp = out["compare"]
    assert not cmp.is_error, cmp.content
    assert cmp.structured_content["result"]["status"] == "diverged"
    first = out["first"].structured_content
    (rank0,) = first["ranks"]
    # The weight is nudged by the script between steps, outside every module: at module
    # level model.0 receives it (its weight, recorded as its input, differs). No origin is
    # claimed, and the result says what to widen.
    assert rank0["origin"] is None
    fd = rank0["first_divergence"]
    assert fd["role"] == "receiver" and fd["a"]["step"] == 2 and fd["a"]["scope"].endswith("0")
    assert 1 in fd["differing_inputs"]  # the weight, after the activation
    assert rank0["outside_scope"] is not None
    assert "receiver" in first["markdown"].lower()
    traces = json.loads(out["traces"])
    assert [c["capture"]["level"] for c in traces["captures"]] == ["module", "module"]
    assert all(c["files"] for c in traces["captures"])
    assert traces["comparisons"][0]["status"] == "diverged"
    st = ws.ledger.state()
    kinds = [e.kind for e in st.evidence]
    assert kinds.count(EvidenceKind.rerun) == 2 and EvidenceKind.trace_compare in kinds
    rerun = next(e for e in st.evidence if e.kind == EvidenceKind.rerun)
    assert rerun.artifacts and all(len(a.sha256) == 64 for a in rerun.artifacts)


def test_mcp_capture_refused_for_untrusted_case(tmp_path):
    root = make_relaunch_workspace(tmp_path)
    (root / "triage.toml").rename(root / "other.toml")
    ws = Workspace(root)

    async def go():
        async with Client(build_server(ws)) as c:
            opened = await c.call_tool("open_case", {"path": "other.toml"})
            cap = await c.call_tool("capture_trace", {"run": "b", "first_step": 0, "last_step": 1})
            return opened, cap

    opened, cap = run_async(go)
    # A case file not named at start may not bring launch commands at all.
    assert opened.is_error and "launch commands" in opened.content[0].text
    assert cap.is_error and "no case is open" in cap.content[0].text
    assert not (root / ".triage" / "runs").exists()


def test_mcp_compare_and_first_divergence_on_planted_traces(tmp_path):
    from triage_agent.compare.synth import SynthSpec, write_pair

    root = make_relaunch_workspace(tmp_path)
    ta, tb = write_pair(SynthSpec(events=400, diverge_at=123, insert_at=[300]), root / "traces")
    ws = Workspace(root)

    async def go():
        async with Client(build_server(ws)) as c:
            args = {"trace_a": str(ta), "trace_b": str(tb)}
            cmp = await c.call_tool("compare_traces", {**args, "hypotheses": []})
            first = await c.call_tool("first_divergence", args)
            outside = await c.call_tool("first_divergence", {**args, "trace_b": "/tmp"})
            return cmp, first, outside

    cmp, first, outside = run_async(go)
    assert not cmp.is_error, cmp.content
    res = cmp.structured_content["result"]
    assert res["status"] == "diverged"
    (rank0,) = first.structured_content["ranks"]
    assert rank0["origin"]["a"]["index"] == 123
    # The extra event in B is reported, not skipped.
    assert rank0["unmatched_total"] >= 1 and res["ranks"][0]["unmatched"]
    assert outside.is_error and "outside the allowed roots" in outside.content[0].text
    ev = ws.ledger.state().evidence
    assert [e.kind for e in ev] == [EvidenceKind.trace_compare]
    assert ev[0].artifacts and ev[0].data.origins


def test_mcp_confirm_bytes_counts_differing_elements(tmp_path):
    import numpy as np

    root = make_relaunch_workspace(tmp_path)
    a = np.arange(8, dtype=np.float32)
    b = a.copy()
    b[5] = np.nextafter(b[5], np.float32(100))
    b[6] = -0.0 if a[6] == 0 else b[6]
    z = np.zeros(2, dtype=np.float32)
    zb = z.copy()
    zb[1] = -0.0
    (root / "d").mkdir()
    np.save(root / "d" / "a.npy", np.concatenate([a, z]))
    np.save(root / "d" / "b.npy", np.concatenate([b, zb]))
    ws = Workspace(root)

    async def go():
        async with Client(build_server(ws)) as c:
            return await c.call_tool("confirm_bytes", {"dump_a": "d/a.npy", "dump_b": "d/b.npy"})

    r = run_async(go)
    assert not r.is_error, r.content
    rep = r.structured_content["report"]
    assert rep["equal"] is False
    (t,) = rep["tensors"]
    assert t["differing"] == 2 and t["max_ulp"] is not None
    assert ws.ledger.state().evidence[0].kind == EvidenceKind.byte_compare


def test_mcp_compare_evidence_names_event_role_and_call_site(tmp_path):
    """The recorded summary says what differs first, as the headless workflow's does: the
    candidate's role, event and call site, never only 'traces diverged'."""
    from test_compare_support import ev, write_trace

    root = make_relaunch_workspace(tmp_path)
    ea = [
        ev(0, "Linear", ["x", "w0"], ["y0"], scope="model.0", kind="module"),
        ev(1, "aten::slice.Tensor", ["x"], ["s0"], scope="model.1", caller="model.py:9"),
    ]
    eb = [
        ev(
            0, "SGD", ["w0"], ["w1"], scope="model.0.weight", kind="optimizer", caller="train.py:42"
        ),
        ev(1, "Linear", ["x", "w1"], ["y1"], scope="model.0", kind="module"),
        ev(2, "aten::slice.Tensor", ["x"], ["s1"], scope="model.1", caller="model.py:9"),
    ]
    write_trace(root / "ta", ea)
    write_trace(root / "tb", eb)
    ws = Workspace(root)

    async def go():
        async with Client(build_server(ws)) as c:
            args = {"trace_a": "ta", "trace_b": "tb"}
            return (
                await c.call_tool("compare_traces", args),
                await c.call_tool("first_divergence", args),
            )

    cmp, first = run_async(go)
    assert not cmp.is_error, cmp.content
    (e,) = ws.ledger.state().evidence
    assert "only B executes optimizer step (SGD) at model.0.weight::SGD" in e.summary
    assert "from train.py:42" in e.summary
    assert "origin (inputs equal, outputs differ): op event at model.1::aten::slice.Tensor" in (
        e.summary
    )
    assert "from model.py:9" in e.summary
    assert e.data.candidates[0]["call_site"] == "train.py:42"
    (rank0,) = first.structured_content["ranks"]
    assert [c["kind"] for c in rank0["candidates"]] == ["extra", "origin"]
    producers = {p["run"]: p for p in rank0["first_receiver"]["producers"]}
    assert producers["b"]["event"]["name"] == "SGD"


def test_mcp_compare_evidence_without_origin_names_the_first_receiver(tmp_path):
    from test_compare_support import chain, dg, write_trace

    root = make_relaunch_workspace(tmp_path)
    write_trace(root / "ta", chain(4))
    eb = chain(4)
    eb[2] = dict(eb[2], inputs=[dg("written-outside")], outputs=[dg("o2'")], caller="loop.py:5")
    eb[3] = dict(eb[3], inputs=[dg("o2'")], outputs=[dg("o3'")])
    write_trace(root / "tb", eb)
    ws = Workspace(root)

    async def go():
        async with Client(build_server(ws)) as c:
            return await c.call_tool("compare_traces", {"trace_a": "ta", "trace_b": "tb"})

    assert not run_async(go).is_error
    (e,) = ws.ledger.state().evidence
    assert "no origin on the traced events" in e.summary
    assert "receiver (inputs already differ) at rank 0: op aten::gelu [l0] step 0 #2" in e.summary
    assert "from loop.py:5" in e.summary

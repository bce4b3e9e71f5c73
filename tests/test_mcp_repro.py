"""Reproducers through MCP: generate from a hypothesis, launch by id only, evidence moves the
hypothesis, the verdict is accepted; replay of a dumped op under one changed policy."""

from __future__ import annotations

import pytest
from mcp import Client
from test_mcp_support import assert_refused, make_workspace, run_async, stdio_server

from mcp_server.security import Workspace
from mcp_server.server import build_server
from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind


@pytest.fixture
def ws(tmp_path):
    return Workspace(make_workspace(tmp_path))


def test_mcp_reproducer_supports_hypothesis_then_verdict(ws):
    async def go():
        async with Client(build_server(ws)) as c:
            out = {}
            h = await c.call_tool(
                "record_hypothesis",
                {
                    "statement": "bf16 round trip of reduced values before fp32 accumulation",
                    "category": "casts",
                    "reproducer": {"template": "cast_roundtrip", "params": {"n": 4096}},
                },
            )
            hid = h.structured_content["hypothesis"]["id"]
            g1 = await c.call_tool("generate_reproducer", {"hypothesis": hid})
            g2 = await c.call_tool("generate_reproducer", {"hypothesis": hid})
            rid = g1.structured_content["id"]
            out["gen"] = (g1, g2)
            out["by_path"] = await c.call_tool(
                "launch_reproducer", {"id": g1.structured_content["path"]}
            )
            out["unknown"] = await c.call_tool("launch_reproducer", {"id": "R-0123456789abcdef"})
            out["bad_hyp"] = await c.call_tool(
                "launch_reproducer", {"id": rid, "hypotheses": ["H-x"]}
            )
            ev = await c.call_tool(
                "launch_reproducer", {"id": rid, "hypotheses": [hid], "timeout_s": 300}
            )
            out["ev"] = ev
            eid = ev.structured_content["id"]
            result = ev.structured_content["result"]
            out["result"] = result
            if result in ("supported", "refuted"):
                out["upd"] = await c.call_tool(
                    "update_hypothesis",
                    {
                        "id": hid,
                        "status": result,
                        "evidence": [eid],
                        "classification": "policy-difference",
                    },
                )
                if result == "supported":
                    out["verdict"] = await c.call_tool(
                        "record_verdict",
                        {
                            "hypothesis": hid,
                            "classification": "policy-difference",
                            "statement": "rounding to bf16 before fp32 accumulation changes the bytes",
                            "evidence": [eid],
                        },
                    )
            return hid, rid, out

    hid, rid, out = run_async(go)
    g1, g2 = out["gen"]
    assert not g1.is_error, g1.content
    assert g1.structured_content["id"] == g2.structured_content["id"] == rid
    assert g1.structured_content["path"].startswith(str(ws.ledger.workspace))
    assert out["by_path"].is_error  # ids only: a path is not an id
    assert out["unknown"].is_error and "not recorded" in out["unknown"].content[0].text
    assert out["bad_hyp"].is_error and "H-x" in out["bad_hyp"].content[0].text
    ev = out["ev"]
    assert not ev.is_error, ev.content
    assert ev.structured_content["kind"] == "reproducer"
    # 4096 random fp32 values are (almost) never all representable in bf16: the round trip
    # must change the fp32 accumulation, so the template reports supported.
    assert out["result"] == "supported", ev.structured_content["summary"]
    st = ws.ledger.state()
    (rec,) = [e for e in st.evidence if e.kind == EvidenceKind.reproducer]
    assert rec.hypotheses == [hid] and rec.argv and rec.artifacts
    assert not out["upd"].is_error and st.hypotheses[hid].status.value == "supported"
    assert not out["verdict"].is_error, out["verdict"].content
    assert st.verdict is not None and st.verdict.evidence == [rec.id]


def test_mcp_reproducer_file_modified_after_generation_is_refused(ws):
    async def go():
        async with Client(build_server(ws)) as c:
            g = await c.call_tool(
                "generate_reproducer",
                {"reproducer": {"template": "cast_roundtrip", "params": {"n": 16}}},
            )
            path = g.structured_content["path"]
            with open(path, "a") as f:
                f.write("\nimport os; os.system('id')\n")
            return await c.call_tool("launch_reproducer", {"id": g.structured_content["id"]})

    r = run_async(go)
    assert r.is_error and "modified after generation" in r.content[0].text
    assert not [e for e in ws.ledger.state().evidence if e.kind == EvidenceKind.reproducer]


@pytest.mark.parametrize(
    "args,msg",
    [
        ({}, "exactly one"),
        ({"finding": "F-1", "hypothesis": "H-1"}, "exactly one"),
        ({"reproducer": {"template": "nope"}}, "unknown reproducer template"),
        ({"reproducer": {"template": "cast_roundtrip", "params": {"n": -1}}}, "invalid parameter"),
        ({"finding": "F-missing"}, "no finding"),
    ],
)
def test_mcp_generate_bad_input(ws, args, msg):
    async def go():
        async with Client(build_server(ws)) as c:
            return await c.call_tool("generate_reproducer", args)

    r = run_async(go)
    assert r.is_error and msg in r.content[0].text


def test_mcp_replay_op_one_policy_at_a_time(ws):
    import torch

    a, b = torch.randn(64), torch.randn(64)
    dump = ws.root / "dumps" / "add.pt"
    dump.parent.mkdir()
    torch.save({"name": "aten::add.Tensor", "inputs": [a, b], "outputs": [a + b]}, dump)

    async def go():
        async with Client(build_server(ws)) as c:
            ok = await c.call_tool("replay_op", {"dump": "dumps/add.pt", "repeats": 3})
            two = await c.call_tool(
                "replay_op",
                {"dump": "dumps/add.pt", "policy": {"deterministic": True, "dtype": "float64"}},
            )
            out = await c.call_tool("replay_op", {"dump": "/etc/hostname"})
            return ok, two, out

    ok, two, out = run_async(go)
    assert not ok.is_error, ok.content
    data = ok.structured_content["data"]
    assert ok.structured_content["kind"] == "replay"
    assert data["repeatable"] is True and data["reproduces_recorded"] is True
    assert two.is_error and "one policy at a time" in two.content[0].text
    assert out.is_error and "outside the allowed roots" in out.content[0].text


@pytest.mark.gpu
def test_mcp_replay_op_on_cuda(ws):
    """The replay runs on the GPU when asked (the one changed policy is the device)."""
    import torch

    x = torch.zeros(1000, 64)
    index = torch.randint(0, 1000, (100_000,))
    source = torch.randn(100_000, 64)
    dump = ws.root / "dumps" / "index_add.pt"
    dump.parent.mkdir()
    out = x.index_add(0, index, source)
    torch.save({"name": "aten::index_add", "inputs": [x, index, source], "outputs": [out]}, dump)

    async def go():
        async with Client(build_server(ws)) as c:
            return await c.call_tool(
                "replay_op",
                {
                    "dump": "dumps/index_add.pt",
                    "repeats": 10,
                    "policy": {"device": "cuda"},
                    "nontensor_args": {"dim": 0},
                },
            )

    r = run_async(go)
    assert not r.is_error, r.content
    data = r.structured_content["data"]
    assert data["device"].startswith("cuda") and len(data["runs"]) == 10
    assert data["repeatable"] == (data["distinct_runs"] == 1)


# A small job: the step's dropout and a validation helper on torch's global generator.
DRAW_TRAIN = """import torch
import torch.nn as nn
import torch.nn.functional as F

import helpers


def main(steps=4):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.2), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = helpers.held_out(32)
    for step in range(steps):
        loss = F.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(step, helpers.pick_rows(32, 4))
"""
DRAW_HELPERS = """import torch


def pick_rows(rows, k):
    return torch.randperm(rows)[:k]


def held_out(n):
    g = torch.Generator().manual_seed(7)
    return torch.randn(n, 8, generator=g), torch.randn(n, generator=g)
"""


def test_mcp_rng_advance_over_stdio_names_the_function_that_draws(tmp_path):
    """Over stdio: the scan points at the helper's draw, and the rng_advance reproducer,
    generated and launched by id, finds that the helper advances torch's CPU generator and
    that the function drawing from a generator of its own advances none."""
    ws = make_workspace(tmp_path)
    (ws / "src" / "train.py").write_text(DRAW_TRAIN)
    (ws / "src" / "helpers.py").write_text(DRAW_HELPERS)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()

    async def go():
        out = {}
        async with Client(stdio_server(ws), read_timeout_seconds=300) as c:
            await c.call_tool("open_case", {})
            out["probes"] = await c.call_tool("list_probes", {})
            out["scan"] = await c.call_tool("scan", {"probes": ["rng-torch-draw-outside-step"]})
            for name, fn, args in (("draws", "pick_rows", [32, 4]), ("own", "held_out", [32])):
                spec = {
                    "template": "rng_advance",
                    "params": {"function": f"helpers:{fn}", "args": args},
                }
                gen = await c.call_tool("generate_reproducer", {"reproducer": spec})
                assert not gen.is_error, gen.content
                out[name] = await c.call_tool(
                    "launch_reproducer", {"id": gen.structured_content["id"]}
                )
            out["escape"] = await c.call_tool(
                "generate_reproducer",
                {"reproducer": {"template": "rng_advance", "params": {"paths": [str(outside)]}}},
            )
            out["bad"] = await c.call_tool(
                "generate_reproducer",
                {"reproducer": {"template": "rng_advance", "params": {"function": "helpers.pick"}}},
            )
        return out

    out = run_async(go)
    ids = {p["id"] for p in out["probes"].structured_content["probes"]}
    assert {f"rng-{s}-draw-outside-step" for s in ("torch", "numpy", "python")} <= ids
    (finding,) = out["scan"].structured_content["result"]["findings"]
    assert finding["file"].endswith("helpers.py") and finding["line_start"] == 5
    assert "torch.randperm(rows)" in finding["snippet"] and "pick_rows" in finding["rationale"]
    draws, own = out["draws"].structured_content, out["own"].structured_content
    assert not out["draws"].is_error and not out["own"].is_error, (draws, own)
    assert draws["result"] == "supported" and own["result"] == "refuted"
    gens = draws["data"]["output"]["details"]["generators"]
    assert gens["torch_cpu"]["advanced"] == "yes"
    assert gens["numpy"]["advanced"] == gens["python"]["advanced"] == "no"
    assert {g["advanced"] for g in own["data"]["output"]["details"]["generators"].values()} == {
        "no"
    }
    assert "advanced: torch_cpu" in draws["summary"]
    # the case's directories were filled in as the import path, nothing outside the roots
    assert draws["data"]["params"]["paths"] == [str(ws.resolve()), str((ws / "src").resolve())]
    assert_refused(out, {"escape": "outside the allowed roots", "bad": "'function'"})
    reps = [e for e in Ledger(ws / ".triage").state().evidence if e.kind == EvidenceKind.reproducer]
    assert [e.result.value for e in reps] == ["supported", "refuted"]

"""compare_traces over stdio: a long candidate list comes back summarised (its evidence id
first, the first candidates of each rank, counts by kind) and whole as a resource that the
evidence carries, so nothing is hidden and nothing has to be dug out of the ledger."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from test_compare_support import chain, ev, write_trace
from test_mcp_support import make_workspace, run_async, stdio_params

from mcp_server.compare_tools import MAX_CANDIDATES_SHOWN

EXTRA = 12


def _pair_with_extra_draws(root):
    """B runs EXTRA draws A never runs, between A's second and third events, and its fifth
    event gives another output from the same inputs."""
    b = chain(6, diverge=4)
    draws = [
        ev(100 + k, "aten::bernoulli_", [f"p{k}"], [f"m{k}"], scope="l0") for k in range(EXTRA)
    ]
    write_trace(root / "ta", chain(6))
    write_trace(root / "tb", b[:2] + draws + b[2:])


def test_mcp_compare_traces_summarises_candidates_and_serves_the_whole_result(tmp_path):
    ws = make_workspace(tmp_path)
    _pair_with_extra_draws(ws)

    async def go():
        async with Client(stdio_params(ws), read_timeout_seconds=120) as c:
            out = await c.call_tool("compare_traces", {"trace_a": "ta", "trace_b": "tb"})
            assert not out.is_error, out.content
            uri = out.structured_content["full_result"]
            full = await c.read_resource(uri)
            with pytest.raises(MCPError, match="no trace-compare evidence 'nope'"):
                await c.read_resource("triage://compare/nope")
            return out.structured_content, full.contents[0].text

    out, full_text = run_async(go)
    assert next(iter(out)) == "evidence_id"
    (rank,) = out["result"]["ranks"]
    # every extra draw and the origin were found; the reply lists only the first of them
    assert rank["candidates_total"] == EXTRA + 1
    assert len(rank["candidates"]) == MAX_CANDIDATES_SHOWN
    assert out["candidates_by_kind"] == {"extra op": EXTRA, "origin op": 1}
    assert out["full_result"] == f"triage://compare/{out['evidence_id']}"
    full = json.loads(full_text)
    (whole,) = full["ranks"]
    assert len(whole["candidates"]) == EXTRA + 1
    assert whole["candidates"][:MAX_CANDIDATES_SHOWN] == rank["candidates"]
    assert whole["candidates"][-1]["kind"] == "origin"

"""The proof path an assistant takes, as MCP calls through a real SDK client over stdio.

On a corpus case whose cause is a random draw only one run makes (a metrics hook that picks
examples from the global generator when B is launched with ``--log-samples``): confirm the
mismatch, trace both runs over the first differing step, compare, read the event only one
run executes and the function it came from, test that one function under saved-and-restored
generator state, record hypothesis and verdict, write the report. Nothing of the answer is
given to the session: the step comes from confirm_mismatch, the function and its line from
compare_traces; ``expected.toml`` is read only to judge the verdict afterwards.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from cases.corpus import discover, select, stage
from mcp import Client
from test_mcp_support import run_async, stdio_params

from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind, EvidenceResult, HypothesisStatus
from triage_agent.workflow.structural import is_draw

CASE = "torch-metrics-hook-draws"
MAX_CALLS = 12


def _location(call_site: str, root: Path) -> str:
    """``file:line`` of a call site, the file relative to the case directory."""
    file, _, line = call_site.rpartition(":")
    return f"{Path(file).resolve().relative_to(root.resolve())}:{line}"


def _near(location: str, expected: str, tolerance: int) -> bool:
    file, _, line = location.rpartition(":")
    want_file, _, want_line = expected.rpartition(":")
    return file == want_file and abs(int(line) - int(want_line)) <= tolerance


def test_scripted_session_proves_an_extra_draw_in_few_calls(tmp_path):
    (case,) = select(discover(), [CASE])
    root = stage(case, tmp_path).parent
    calls: list[tuple[str, float]] = []  # (tool, seconds)

    async def go():
        async with Client(stdio_params(root), read_timeout_seconds=600) as c:

            async def call(name, args):
                t0 = time.monotonic()
                r = await c.call_tool(name, args)
                calls.append((name, time.monotonic() - t0))
                assert not r.is_error, (name, r.content[0].text)
                return r.structured_content

            out = {}
            await call("open_case", {})
            confirmed = await call("confirm_mismatch", {"relaunch": True})
            assert confirmed["confirmed"] is True
            step = confirmed["report"]["step"]
            traces = {
                run: (
                    await call(
                        "capture_trace",
                        {"run": run, "first_step": step, "last_step": step, "level": "op"},
                    )
                )["trace_dir"]
                for run in ("a", "b")
            }
            compared = await call(
                "compare_traces", {"trace_a": traces["a"], "trace_b": traces["b"]}
            )
            (rank,) = compared["result"]["ranks"]
            listed = rank["candidates"]
            if len(listed) < rank["candidates_total"]:
                # the reply lists the first candidates; the whole list is a resource
                t0 = time.monotonic()
                whole = await c.read_resource(compared["full_result"])
                calls.append(("read " + compared["full_result"], time.monotonic() - t0))
                listed = json.loads(whole.contents[0].text)["ranks"][0]["candidates"]
            # the first event, in execution order, that one run executes and the other does
            # not and that draws from a generator
            extra = next(
                c for c in listed if c["kind"] in ("extra", "missing") and is_draw(c["event"])
            )
            out["extra"] = extra
            run = "b" if extra["kind"] == "extra" else "a"
            target = extra["function"]
            assert target, extra  # without it the intervention would be a guess
            where = _location(extra["call_site"], root)
            hyp = await call(
                "record_hypothesis",
                {
                    "statement": f"only run {run.upper()} calls {target} ({where}), whose "
                    f"{extra['event']} draws from a generator the training step draws from",
                    "category": "rng",
                },
            )
            hid = hyp["hypothesis"]["id"]
            out["rerun"] = await call(
                "rerun_with_intervention",
                {"run": run, "interventions": [f"isolate-rng {target}"], "hypotheses": [hid]},
            )
            rerun_ev = out["rerun"]["evidence_id"]
            await call(
                "update_hypothesis",
                {"id": hid, "status": "supported", "classification": "bug", "evidence": [rerun_ev]},
            )
            chain = [confirmed["evidence_id"], compared["evidence_id"], rerun_ev]
            out["verdict"] = await call(
                "record_verdict",
                {
                    "hypothesis": hid,
                    "classification": "bug",
                    "statement": f"{target} draws from the training generator in run "
                    f"{run.upper()} alone; run under its own saved-and-restored generator state "
                    "every step matches",
                    "location": where,
                    "evidence": chain,
                },
            )
            out["report"] = await call("write_report", {})
            out["hid"], out["chain"], out["where"] = hid, chain, where
            return out

    started = time.monotonic()
    out = run_async(go)
    seconds = time.monotonic() - started
    each = ", ".join(f"{name} {s:.1f}" for name, s in calls)
    print(f"\nscripted session on {CASE}: {len(calls)} tool calls, {seconds:.1f} s wall ({each})")

    assert len(calls) <= MAX_CALLS, calls
    assert out["extra"]["step"] == case.expected.first_divergence_step
    rerun = out["rerun"]
    assert rerun["result"] == "supported" and rerun["match"]["all_match"] is True
    assert rerun["line"].startswith("all ") and rerun["line"].endswith(" steps match")
    verdict = out["verdict"]["verdict"]
    assert verdict["classification"] == "bug" and verdict["hypothesis"] == out["hid"]
    assert verdict["evidence"] == out["chain"]
    # what the client was told is what the ledger on disk holds
    st = Ledger(root / ".triage").state()
    assert st.hypotheses[out["hid"]].status == HypothesisStatus.supported
    assert st.verdict is not None and st.verdict.evidence == out["chain"]
    cited = next(e for e in st.evidence if e.id == rerun["evidence_id"])
    assert cited.kind == EvidenceKind.rerun and cited.result == EvidenceResult.supported
    assert out["hid"] in cited.hypotheses
    report = Path(out["report"]["markdown"])
    assert report.is_file() and out["where"] in report.read_text()
    exp = case.expected
    assert _near(out["where"], exp.location, exp.location_tolerance), (out["where"], exp)

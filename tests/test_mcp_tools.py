"""Every tool through a real in-memory MCP client, plus resources, the prompt, concurrency."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client
from test_mcp_support import make_workspace, run_async

from mcp_server.security import Workspace
from mcp_server.server import build_server
from mcp_server.tools import available_tools
from triage_agent.records import Evidence, EvidenceKind, EvidenceResult


@pytest.fixture
def ws(tmp_path):
    return Workspace(make_workspace(tmp_path))


def call(ws, *steps):
    """Run (tool, args) calls in one client session; return the results."""

    async def go():
        out = []
        async with Client(build_server(ws)) as c:
            for name, args in steps:
                out.append(await c.call_tool(name, args))
        return out

    return run_async(go)


def test_mcp_list_tools_matches_registry_with_schemas_and_annotations(ws):
    async def go():
        async with Client(build_server(ws)) as c:
            return (await c.list_tools()).tools

    tools = run_async(go)
    specs = {s.name: s for s in available_tools()}
    assert {t.name for t in tools} == set(specs)
    for t in tools:
        spec = specs[t.name]
        assert t.input_schema["additionalProperties"] is False
        assert t.output_schema is not None and t.output_schema["type"] == "object"
        assert t.annotations.read_only_hint == spec.annotations.read_only_hint
        assert t.description
    assert specs["ledger_summary"].annotations.read_only_hint is True
    assert specs["record_hypothesis"].annotations.read_only_hint is False


def test_mcp_open_case_records_case_once(ws):
    r1, r2 = call(ws, ("open_case", {}), ("open_case", {}))
    assert not r1.is_error and r1.structured_content["recorded"] is True
    assert r2.structured_content["recorded"] is False
    assert r1.structured_content["case"]["name"] == "toy"
    assert r1.structured_content["workspace"]["launch_trusted"] is True
    assert ws.ledger.state().case.name == "toy"


def test_mcp_create_case_and_confirm_mismatch_from_metric_bits(tmp_path):
    ws = Workspace(make_workspace(tmp_path, with_case_file=False))
    created, wrong, right = call(
        ws,
        (
            "create_case",
            {"name": "c", "run_a": {"metrics": "runs/a"}, "run_b": {"metrics": "runs/b"}},
        ),
        ("confirm_mismatch", {"step": 5}),
        ("confirm_mismatch", {"step": 3}),
    )
    assert not created.is_error, created.content
    assert created.structured_content["workspace"]["launch_trusted"] is False
    w, r = wrong.structured_content, right.structured_content
    assert w["report"]["step"] == 3 and w["report"]["given_step_wrong"] is True
    assert w["confirmed"] is False
    assert r["confirmed"] is True and r["report"]["diff"]["last_equal_step"] == 2
    assert r["common_steps"] == 6
    (m,) = r["report"]["diff"]["mismatches"]
    assert m["metric"] == "loss" and m["a"]["bits"] != m["b"]["bits"]
    st = ws.ledger.state()
    assert [e.kind for e in st.evidence] == [EvidenceKind.metrics] * 2
    assert any("WRONG" in n["text"] for n in st.notes)


def test_mcp_confirm_mismatch_without_case_is_a_tool_error(tmp_path):
    ws = Workspace(make_workspace(tmp_path, with_case_file=False))
    (r,) = call(ws, ("confirm_mismatch", {}))
    assert r.is_error and "no case is open" in r.content[0].text


def test_mcp_hypothesis_lifecycle_needs_execution_evidence(ws):
    (h,) = call(ws, ("record_hypothesis", {"statement": "RNG not restored", "category": "rng"}))
    hid = h.structured_content["hypothesis"]["id"]
    note_ev = ws.ledger.add_evidence(
        Evidence(
            hypotheses=[hid], kind=EvidenceKind.note, result=EvidenceResult.supported, summary="n"
        )
    )
    run_ev = ws.ledger.add_evidence(
        Evidence(
            hypotheses=[hid],
            kind=EvidenceKind.reproducer,
            result=EvidenceResult.supported,
            summary="r",
        )
    )
    bare, static_only, ok, verdict, summary = call(
        ws,
        ("update_hypothesis", {"id": hid, "status": "supported"}),
        ("update_hypothesis", {"id": hid, "status": "supported", "evidence": [note_ev.id]}),
        (
            "update_hypothesis",
            {"id": hid, "status": "supported", "evidence": [run_ev.id], "classification": "bug"},
        ),
        (
            "record_verdict",
            {"hypothesis": hid, "classification": "bug", "statement": "s", "evidence": [run_ev.id]},
        ),
        ("ledger_summary", {"markdown": True}),
    )
    assert bare.is_error and "needs execution evidence" in bare.content[0].text
    assert static_only.is_error
    assert ok.structured_content["hypothesis"]["status"] == "supported"
    assert not verdict.is_error
    s = summary.structured_content
    assert s["verdict"]["hypothesis"] == hid
    assert s["hypotheses"][0]["evidence"] == 2 and s["hypotheses"][0]["verdict"] is True
    assert "RNG not restored" in s["markdown"]


def test_mcp_supported_against_refuting_evidence_needs_a_recorded_reason(ws):
    (h,) = call(ws, ("record_hypothesis", {"statement": "an extra draw", "category": "rng"}))
    hid = h.structured_content["hypothesis"]["id"]

    def rerun(result):
        return ws.ledger.add_evidence(
            Evidence(hypotheses=[hid], kind=EvidenceKind.rerun, result=result, summary="r")
        )

    refuting, _na, supporting = (
        rerun(EvidenceResult.refuted),
        rerun(EvidenceResult.not_applicable),
        rerun(EvidenceResult.supported),
    )
    bare, reasoned, summary = call(
        ws,
        ("update_hypothesis", {"id": hid, "status": "supported", "evidence": [supporting.id]}),
        (
            "update_hypothesis",
            {
                "id": hid,
                "status": "supported",
                "evidence": [supporting.id],
                "reason": "the refuting rerun restored RNG on a run that never resumes",
            },
        ),
        ("ledger_summary", {}),
    )
    text = bare.content[0].text
    assert bare.is_error and refuting.id in text and "needs a stated reason" in text
    got = reasoned.structured_content["hypothesis"]
    assert got["status"] == "supported" and got["status_reason"].startswith("the refuting")
    assert ws.ledger.state().hypotheses[hid].status_reason == got["status_reason"]
    s = summary.structured_content
    (row,) = s["hypotheses"]
    assert (row["supported"], row["refuted"], row["not_applicable"]) == (1, 1, 1)
    assert row["status_reason"] == got["status_reason"]
    assert s["evidence_by_result"]["not-applicable"] == 1
    assert s["evidence_by_result"]["refuted"] == 1
    md = call(ws, ("ledger_summary", {"markdown": True}))[0].structured_content["markdown"]
    assert "| 3 (1 supported, 1 refuted, 1 n/a) |" in md
    assert f"- {hid} supported: the refuting rerun" in md


def test_mcp_record_verdict_refused_without_execution_evidence_is_tool_error(ws):
    before = ws.ledger.state().events
    (r,) = call(ws, ("record_verdict", {"classification": "bug", "statement": "guess"}))
    assert r.is_error and "execution evidence" in r.content[0].text
    assert ws.ledger.state().verdict is None and ws.ledger.state().events == before


def test_mcp_record_hypothesis_rejects_unknown_finding(ws):
    (r,) = call(
        ws, ("record_hypothesis", {"statement": "s", "category": "c", "findings": ["F-nope"]})
    )
    assert r.is_error and "F-nope" in r.content[0].text


def test_mcp_update_unknown_hypothesis_is_tool_error(ws):
    (r,) = call(ws, ("update_hypothesis", {"id": "H-missing", "classification": "bug"}))
    assert r.is_error and "H-missing" in r.content[0].text


def test_mcp_add_note_appends(ws):
    (r,) = call(ws, ("add_note", {"text": "static budget spent: 12 min"}))
    assert r.structured_content["recorded"] is True
    assert ws.ledger.state().notes[-1]["text"] == "static budget spent: 12 min"


def test_mcp_resources_and_prompt(ws):
    async def go():
        async with Client(build_server(ws)) as c:
            await c.call_tool("open_case", {})
            uris = {str(r.uri) for r in (await c.list_resources()).resources}
            ledger = (await c.read_resource("triage://ledger")).contents[0].text
            case = (await c.read_resource("triage://case")).contents[0].text
            prompt = await c.get_prompt("two_stage_triage", {"budget_minutes": "15"})
            return uris, ledger, case, prompt

    uris, ledger, case, prompt = run_async(go)
    assert {"triage://ledger", "triage://ledger.md", "triage://findings", "triage://case"} <= uris
    assert '"name": "toy"' in ledger and '"mismatch_step": 3' in case
    text = prompt.messages[0].content.text
    assert "step 3" in text and "15 minutes" in text and "ONE changed" in text
    # Tools this server lacks are named as absent, never offered.
    for spec_name in ("open_case", "record_verdict"):
        assert f"`{spec_name}`" in text


def test_mcp_concurrent_calls_all_append(ws):
    n = 24

    async def go():
        async with Client(build_server(ws)) as c:
            results = []

            async def one(i):
                name = "add_note" if i % 2 else "record_hypothesis"
                args = {"text": f"n{i}"} if i % 2 else {"statement": f"h{i}", "category": "c"}
                results.append(await c.call_tool(name, args))

            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(one, i)
            return results

    results = run_async(go)
    assert not any(r.is_error for r in results)
    st = ws.ledger.state()
    assert len(st.notes) == n // 2 and len(st.hypotheses) == n // 2
    assert st.torn_tail is None


def test_mcp_list_probes_mirrors_the_probe_registry(ws):
    from probes.registry import all_probes

    (r,) = call(ws, ("list_probes", {}))
    ids = [p["id"] for p in r.structured_content["probes"]]
    assert ids == [p.id for p in all_probes()] and ids
    cat = all_probes()[0].category
    (f,) = call(ws, ("list_probes", {"category": cat}))
    assert {p["category"] for p in f.structured_content["probes"]} == {cat}


def test_mcp_write_report_inside_workspace_only(ws):
    ok, escape = call(
        ws,
        ("write_report", {}),
        ("write_report", {"out_dir": "../elsewhere"}),
    )
    assert not ok.is_error, ok.content
    md = ok.structured_content["markdown"]
    assert md.startswith(str(ws.root)) and open(md).read().strip()

    async def read():
        async with Client(build_server(ws)) as c:
            return (await c.read_resource("triage://report")).contents[0].text

    assert run_async(read) == open(md).read()
    assert escape.is_error and "outside the allowed roots" in escape.content[0].text
    assert not (ws.root.parent / "elsewhere").exists()


def test_mcp_scan_records_ranked_findings_and_reports_budget(ws):
    from test_mcp_support import TRAIN_SRC

    (ws.root / "src" / "loop.py").write_text(TRAIN_SRC)
    progress = []

    async def go():
        async with Client(build_server(ws)) as c:
            await c.call_tool("open_case", {})

            async def on_progress(done, total, message):
                progress.append((done, total, message))

            full = await c.call_tool("scan", {"paths": ["src"]}, progress_callback=on_progress)
            tiny = await c.call_tool("scan", {"paths": ["src"], "max_files": 1, "record": False})
            return full, tiny

    full, tiny = run_async(go)
    assert not full.is_error, full.content
    res = full.structured_content["result"]
    probes = {f["probe_id"] for f in res["findings"]}
    assert "rng-manual-seed-in-loop" in probes
    assert all(f["file"].endswith(".py") for f in res["findings"])
    st = ws.ledger.state()
    assert len(st.findings) == full.structured_content["recorded"] == len(res["findings"])
    assert progress and progress[-1][0] == res["files_scanned"]
    t = tiny.structured_content
    assert (
        t["recorded"] == 0
        and t["result"]["budget_hit"]
        and "1-file budget" in t["result"]["budget_hit"]
    )
    # The recorded finding can back a hypothesis.
    fid = next(iter(st.findings))
    (h,) = call(
        ws, ("record_hypothesis", {"statement": "s", "category": "rng-state", "findings": [fid]})
    )
    assert not h.is_error


def test_mcp_scan_paths_and_modules_must_be_contained(ws):
    out, mod = call(
        ws,
        ("scan", {"paths": ["/usr/lib"]}),
        ("scan", {"paths": ["json"]}),  # an installed module outside the roots
    )
    assert out.is_error and "outside the allowed roots" in out.content[0].text
    assert mod.is_error and "outside the allowed roots" in mod.content[0].text


def test_mcp_ledger_of_one_case_refuses_another(ws):
    first, other = call(
        ws,
        ("open_case", {}),
        (
            "create_case",
            {"name": "other", "run_a": {"metrics": "runs/a"}, "run_b": {"metrics": "runs/b"}},
        ),
    )
    assert not first.is_error
    assert other.is_error and "belongs to case 'toy'" in other.content[0].text
    assert ws.ledger.state().case.name == "toy" and ws.case.name == "toy"


def test_mcp_server_reopens_the_ledger_case_on_restart(tmp_path):
    root = make_workspace(tmp_path, with_case_file=False)
    ws = Workspace(root)
    call(
        ws,
        (
            "create_case",
            {"name": "kept", "run_a": {"metrics": "runs/a"}, "run_b": {"metrics": "runs/b"}},
        ),
    )
    again = Workspace(root)
    assert again.case is not None and again.case.name == "kept"
    (r,) = call(again, ("confirm_mismatch", {}))
    assert not r.is_error and r.structured_content["report"]["step"] == 3


def test_mcp_list_templates_with_param_schemas(ws):
    from reproducers.params import TEMPLATES

    everything, one, bad = call(
        ws,
        ("list_templates", {}),
        ("list_templates", {"name": "cast_roundtrip"}),
        ("list_templates", {"name": "nope"}),
    )
    names = [t["name"] for t in everything.structured_content["templates"]]
    assert names == list(TEMPLATES)
    (t,) = one.structured_content["templates"]
    assert t["params_schema"]["type"] == "object" and t["supported_means"]
    assert bad.is_error and "unknown reproducer template" in bad.content[0].text


def test_mcp_corrupted_ledger_is_a_tool_error_and_nothing_is_lost(ws):
    call(ws, ("add_note", {"text": "first"}), ("add_note", {"text": "second"}))
    raw = ws.ledger.path.read_bytes()
    lines = raw.split(b"\n")
    ws.ledger.path.write_bytes(b"\n".join([lines[0], b"{not json", *lines[1:]]))
    (r,) = call(ws, ("ledger_summary", {}))
    assert r.is_error and "corrupted" in r.content[0].text and "\n" not in r.content[0].text
    # Refused writes leave the file as it was: the ledger is append-only.
    (w,) = call(ws, ("record_hypothesis", {"statement": "s", "category": "c"}))
    assert w.is_error
    assert ws.ledger.path.read_bytes().count(b"\n") == raw.count(b"\n") + 1


def test_mcp_torn_tail_is_reported(ws):
    call(ws, ("add_note", {"text": "kept"}))
    with open(ws.ledger.path, "ab") as f:
        f.write(b'{"v": 1, "kind": "note", "da')
    (r,) = call(ws, ("ledger_summary", {}))
    assert not r.is_error and "ignored" in r.structured_content["torn_tail"]
    assert r.structured_content["events"] == 1


def test_mcp_unexpected_failure_is_generic_and_server_survives(ws, monkeypatch):
    import mcp_server.case_tools as ct

    def boom(state):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(ct, "hypothesis_rows", boom)

    async def go():
        async with Client(build_server(ws)) as c:
            bad = await c.call_tool("ledger_summary", {})
            good = await c.call_tool("add_note", {"text": "still here"})
            return bad, good

    bad, good = run_async(go)
    assert bad.is_error and bad.content[0].text == "Error executing tool ledger_summary"
    assert not good.is_error


def test_mcp_resources_missing_are_clear_errors(tmp_path):
    from mcp.shared.exceptions import MCPError

    ws = Workspace(make_workspace(tmp_path, with_case_file=False))

    async def go():
        msgs = []
        async with Client(build_server(ws)) as c:
            for uri in ("triage://report", "triage://case"):
                try:
                    await c.read_resource(uri)
                    msgs.append(None)
                except MCPError as exc:
                    msgs.append(str(exc))
            info = (await c.read_resource("triage://workspace")).contents[0].text
        return msgs, info

    (report, case), info = run_async(go)
    assert report and "no report written yet" in report
    assert case and "no case is open" in case
    assert str(ws.root) in info


def test_mcp_registry_a_package_that_fails_to_import_is_an_error_not_a_missing_tool():
    """A broken library package must stop the server at start-up, not drop its tools."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['triage_agent.compare'] = None  # any import of it raises ImportError\n"
        "from mcp_server.tools import available_tools\n"
        "print(sorted(s.name for s in available_tools()))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0, f"tools listed without their package: {proc.stdout}"
    last = proc.stderr.strip().splitlines()[-1]
    assert "Error" in last and "triage_agent.compare" in last, proc.stderr
    names = {s.name for s in available_tools()}
    assert {"compare_traces", "first_divergence", "confirm_bytes"} <= names


def test_mcp_ledger_summary_gives_the_confirmed_mismatch_step(tmp_path):
    """A case that names no step: after confirm_mismatch the summary gives the step the
    metric bits confirmed, not null."""
    ws = Workspace(make_workspace(tmp_path, with_case_file=False))
    created, before, confirmed, after = call(
        ws,
        ("create_case", {"run_a": {"metrics": "runs/a"}, "run_b": {"metrics": "runs/b"}}),
        ("ledger_summary", {}),
        ("confirm_mismatch", {}),
        ("ledger_summary", {}),
    )
    assert not created.is_error and not confirmed.is_error
    assert before.structured_content["mismatch_step"] is None
    s = after.structured_content
    assert s["mismatch_step"] == 3 and s["mismatch_step_given"] is None
    assert ws.ledger.state().confirmed_step() == 3


def test_mcp_inputs_take_their_defaults_and_descriptions_from_the_library_models():
    """A tool input that restates a library option drifts from it: these fields are the
    library's own, a tool call only held to tighter bounds."""
    from mcp_server.compare_tools import TracePairIn
    from mcp_server.scan_tools import ScanIn
    from mcp_server.workflow_tools import RunWorkflowIn
    from probes.scan import ScanRequest
    from triage_agent.compare.distributed import Executor
    from triage_agent.workflow.options import RunOptions

    for tool, lib, names in (
        (RunWorkflowIn, RunOptions, list(RunOptions.model_fields)),
        (TracePairIn, Executor, ["workers", "ray"]),
        (ScanIn, ScanRequest, ["around", "window", "categories", "probes", "functions"]),
    ):
        for name in names:
            said = [
                (f.get_default(call_default_factory=True), f.description)
                for f in (tool.model_fields[name], lib.model_fields[name])
            ]
            assert said[0] == said[1], (tool.__name__, name, said)


def _state_record(ws, run: str, point: str, pid: int, net) -> None:
    from triage_agent.boundary_capture import write_report
    from triage_agent.manifest import BoundaryRecord, build_manifest
    from triage_agent.runs import STATE_RECORDS

    state = {"model": net.state_dict(), "model_structure": {"hooks": f"{pid % 2}"}}
    rec = BoundaryRecord(point=point, rank=0, pid=pid, manifest=build_manifest(state))
    out = ws.ledger.workspace / "runs" / run / "baseline-k" / STATE_RECORDS
    write_report(out, f"state-{point}-rank0-pid{pid}.json", rec)


def test_mcp_compare_state_between_runs_and_across_a_resume(ws):
    import torch

    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    _state_record(ws, "a", "after-2", 10, net)
    _state_record(ws, "b", "end-2", 20, net)  # the saving process, as its checkpoint is written
    _state_record(ws, "b", "after-2", 20, net)
    with torch.no_grad():
        net.bias.add_(1.0)  # the resumed process rebuilt another bias
    _state_record(ws, "b", "after-2", 21, net)
    runs, resume, missing, bad = call(
        ws,
        ("compare_state", {"point": "after-2"}),
        ("compare_state", {"point": "after-2", "between": "resume"}),
        ("compare_state", {"point": "step-3"}),
        ("compare_state", {"point": "after-2; rm -rf /"}),
    )
    r = runs.structured_content
    # the newest record of each run at the point: B's resumed process, whose bias moved
    assert r["comparison"]["a"]["pid"] == 10 and r["comparison"]["b"]["pid"] == 21
    paths = [d["path"] for d in r["comparison"]["differences"]]
    assert "model.bias" in paths and "model.weight" not in paths
    s = resume.structured_content["comparison"]
    assert (s["a"]["point"], s["a"]["pid"], s["b"]["point"], s["b"]["pid"]) == (
        "end-2",
        20,
        "after-2",
        21,
    )
    assert any(d["path"] == "model.bias" for d in s["differences"])
    assert s["points"]["b"] == ["after-2", "end-2"]
    ev = {e.id: e for e in ws.ledger.state().evidence}
    assert ev[resume.structured_content["evidence_id"]].kind == EvidenceKind.manifest
    assert missing.is_error and "records hold: after-2" in missing.content[0].text
    assert bad.is_error

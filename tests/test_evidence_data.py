"""Typed evidence data: one model per evidence kind; what the writers record today reads into
them with nothing left over, and anything else recorded is kept, never dropped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError
from test_compare_support import chain, write_trace
from test_mcp_support import make_workspace

from triage_agent.evidence_data import (
    MODELS,
    EvidenceData,
    MetricsData,
    ReplayData,
    RerunData,
    TraceCompareData,
    dump_data,
    parse_data,
)
from triage_agent.ledger import SCHEMA_VERSION, Ledger
from triage_agent.ledger_view import to_markdown
from triage_agent.records import Evidence, EvidenceKind, EvidenceResult


def test_evidence_data_every_kind_has_a_model():
    assert set(MODELS) == {k.value for k in EvidenceKind}


def test_evidence_data_union_is_discriminated_by_kind():
    d = TypeAdapter(EvidenceData).validate_python({"kind": "rerun", "first_step": 3})
    assert isinstance(d, RerunData) and d.first_step == 3


def _read_back_whole(ledger):
    """Each evidence as the ledger folds it, checked against its line as written."""
    written = {
        e.data["id"]: e.data["data"] for e in ledger.read_events()[0] if e.kind == "evidence"
    }
    out = []
    for ev in ledger.state().evidence:
        d = ev.data
        assert d.extra == {}, f"{ev.kind.value} evidence writes keys its model lacks: {d.extra}"
        assert dump_data(d) == written[ev.id]
        out.append(d)
    return out


def test_evidence_data_metrics_and_trace_compare_writers_fit_their_models(tmp_path):
    import numpy as np

    from mcp_server.case_tools import ConfirmMismatchIn, CreateCaseIn, confirm_mismatch, create_case
    from mcp_server.compare_tools import CompareIn, ConfirmBytesIn, compare_traces, confirm_bytes
    from mcp_server.security import Workspace

    ws = Workspace(make_workspace(tmp_path, with_case_file=False))
    quiet = lambda *a: None  # noqa: E731
    create_case(ws, CreateCaseIn(run_a={"metrics": "runs/a"}, run_b={"metrics": "runs/b"}), quiet)
    confirm_mismatch(ws, ConfirmMismatchIn(), quiet)
    write_trace(tmp_path / "ta", chain(6))
    write_trace(tmp_path / "tb", chain(6, diverge=3))
    compare_traces(ws, CompareIn(trace_a="ta", trace_b="tb"), quiet)
    a = np.arange(4, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", a + 1)
    confirm_bytes(ws, ConfirmBytesIn(dump_a="a.npy", dump_b="b.npy"), quiet)
    typed = _read_back_whole(ws.ledger)
    assert [d.kind for d in typed] == ["metrics", "trace-compare", "byte-compare"]
    m, t, _ = typed
    assert isinstance(m, MetricsData) and m.step == 3
    assert isinstance(t, TraceCompareData) and t.status == "diverged"
    assert t.candidates[0]["kind"] == "origin"


def test_evidence_data_unknown_or_misshapen_keys_are_kept_in_extra():
    recorded = {"first_step": "three", "policy": "restore-rng", "future_key": [1, 2]}
    d = parse_data("rerun", recorded)
    assert isinstance(d, RerunData) and d.policy == "restore-rng" and d.first_step is None
    assert d.extra == {"first_step": "three", "future_key": [1, 2]}
    assert dump_data(d) == recorded


# Lines written by version 1 of the ledger (a stage-2 window search, interventions, a fix
# check, a replay and a crash, recorded by their writers before evidence data was typed).
V1_LEDGER = Path(__file__).parent / "data" / "ledger-v1.jsonl"


def _v1_copy(tmp_path: Path) -> Ledger:
    shutil.copy(V1_LEDGER, tmp_path / Ledger.FILENAME)
    return Ledger(tmp_path)


def _written(path: Path) -> dict[str, dict]:
    """Each evidence id's data as last written on disk."""
    out = {}
    for line in path.read_text().splitlines():
        ev = json.loads(line)
        if ev["kind"] == "evidence":
            out[ev["data"]["id"]] = ev["data"]
    return out


def test_a_version_1_ledger_reads_typed_and_loses_nothing(tmp_path):
    assert {json.loads(ln)["v"] for ln in V1_LEDGER.read_text().splitlines()} == {1}
    ledger = _v1_copy(tmp_path)
    st = ledger.state()
    by_kind: dict[str, list] = {}
    for ev in st.evidence:
        assert isinstance(ev.data, MODELS[ev.kind.value])
        assert ev.data.extra == {}, (ev.kind.value, ev.data.extra)  # every v1 key has a field
        by_kind.setdefault(ev.kind.value, []).append(ev.data)
    assert set(by_kind) == {"metrics", "static", "trace-compare", "rerun", "replay"}
    metrics, crash = by_kind["metrics"]
    assert metrics.step == 3 and metrics.metrics_a and metrics.diff["first_step"] == 3
    assert crash.failing_run == "b" and crash.rerun["runs"] == ["b", "a"]
    assert st.confirmed_step() == 3
    traces = by_kind["trace-compare"]
    assert [t.steps for t in traces][-1] == [0, 0] and set(traces[-1].trace_dirs) == {"a", "b"}
    assert all(isinstance(t.rerun, dict) for t in traces)
    reruns = by_kind["rerun"]
    assert ["unset TOY_JITTER"] in [r.changed for r in reruns]
    assert any(r.policy and r.applied_to == "A and B" for r in reruns)
    (replay,) = by_kind["replay"]
    assert replay.reproduces_recorded is True and replay.policy is not None
    # nothing recorded is lost: each evidence dumps back to exactly the data it was read from
    written = _written(V1_LEDGER)
    assert {ev.id: ev.model_dump(mode="json") for ev in st.evidence} == written


def test_a_version_1_ledger_takes_version_2_appends_and_still_reads(tmp_path):
    ledger = _v1_copy(tmp_path)
    before = ledger.state()
    ledger.add_evidence(
        Evidence(
            kind=EvidenceKind.rerun,
            result=EvidenceResult.observed,
            summary="appended",
            data=RerunData(policy="deterministic", first_step=None),
        )
    )
    lines = ledger.path.read_text().splitlines()
    assert json.loads(lines[-1])["v"] == SCHEMA_VERSION == 2
    after = ledger.state()
    assert after.evidence[:-1] == before.evidence
    assert after.evidence[-1].data_as(RerunData).policy == "deterministic"
    assert json.loads(lines[-1])["data"]["data"] == {"policy": "deterministic", "first_step": None}


def test_a_reader_asking_for_a_renamed_key_fails_loudly(tmp_path):
    ev = next(e for e in _v1_copy(tmp_path).state().evidence if e.kind == "trace-compare")
    assert ev.data_as(TraceCompareData).trace_dirs
    with pytest.raises(AttributeError):
        ev.data.trace_dir  # noqa: B018 - the key is trace_dirs
    with pytest.raises(TypeError, match="trace-compare evidence, not RerunData"):
        ev.data_as(RerunData)
    with pytest.raises(ValueError):
        ev.data.explain = []  # a writer that misspells explains
    with pytest.raises(ValidationError):
        TraceCompareData(trace_dir={"a": "x"})


def test_an_unknown_key_lands_in_extra_and_is_written_back(tmp_path):
    ledger = Ledger(tmp_path)
    # a writer that still passes a dict: read into its kind's model, the unknown key kept
    ev = ledger.add_evidence(
        Evidence(
            kind=EvidenceKind.rerun,
            result=EvidenceResult.observed,
            summary="s",
            data={"policy": "restore-rng", "first_step": 2, "written_later": {"x": [1]}},
        )
    )
    assert isinstance(ev.data, RerunData) and ev.data.first_step == 2
    assert ev.data.extra == {"written_later": {"x": [1]}}
    on_disk = _written(ledger.path)[ev.id]["data"]
    assert on_disk == {"policy": "restore-rng", "first_step": 2, "written_later": {"x": [1]}}
    back = ledger.state().evidence[0]
    assert back.data.extra == {"written_later": {"x": [1]}} and back == ev


def test_evidence_data_of_another_kind_is_refused():
    with pytest.raises(ValidationError, match="RerunData is data of rerun evidence, not note"):
        Evidence(kind="note", result="observed", summary="s", data=RerunData(policy="p"))


def test_evidence_data_keeps_its_published_schema_an_object():
    # MCP tools publish Evidence as their output schema; clients validate against it
    assert Evidence.model_json_schema()["properties"]["data"]["type"] == "object"
    ev = Evidence(kind="replay", result="observed", summary="s", data=ReplayData(repeats=3))
    assert ev.model_dump(mode="json")["data"] == {"repeats": 3}


def test_a_version_1_ledger_reads_to_the_markdown_version_1_code_wrote(tmp_path):
    # ledger-v1.md was rendered from ledger-v1.jsonl by the code that wrote version 1
    shown = to_markdown(_v1_copy(tmp_path).state())
    assert shown == (V1_LEDGER.parent / "ledger-v1.md").read_text()

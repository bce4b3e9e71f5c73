"""Typed evidence data: one model per evidence kind; what the writers record today reads into
them with nothing left over, and anything else recorded is kept, never dropped."""

from __future__ import annotations

from pydantic import TypeAdapter
from test_compare_support import chain, write_trace
from test_mcp_support import make_workspace

from triage_agent.evidence_data import (
    MODELS,
    EvidenceData,
    MetricsData,
    RerunData,
    TraceCompareData,
    dump_data,
    parse_data,
)
from triage_agent.records import EvidenceKind


def test_evidence_data_every_kind_has_a_model():
    assert set(MODELS) == {k.value for k in EvidenceKind}


def test_evidence_data_union_is_discriminated_by_kind():
    d = TypeAdapter(EvidenceData).validate_python({"kind": "rerun", "first_step": 3})
    assert isinstance(d, RerunData) and d.first_step == 3


def _read_back_whole(ev):
    d = parse_data(ev.kind.value, ev.data)
    assert d.extra == {}, f"{ev.kind.value} evidence writes keys its model lacks: {d.extra}"
    assert dump_data(d) == ev.data
    return d


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
    typed = [_read_back_whole(e) for e in ws.ledger.state().evidence]
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

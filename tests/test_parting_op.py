"""Where two op streams part, B's own op there: the first it runs that computes (a view
only aliases), or, where A runs ops B skips, the op B goes on with. Trace files in the
format the tracer writes, read by the comparator the workflow uses."""

from __future__ import annotations

from pathlib import Path

from test_compiled_region_reading import _trace

from triage_agent.workflow.setting_effect import read_traces


def _op(name: str, ins: list[str], outs: list[str]) -> tuple:
    return ("op", "forward", "", name, ins, outs, {})


HEAD = [_op("aten::mm", ["x", "w"], ["h"]), _op("aten::relu", ["h"], ["r"])]


def test_b_runs_other_ops_where_the_streams_part(tmp_path: Path):
    a = _trace(tmp_path / "a", [*HEAD, _op("aten::mul", ["r", "s"], ["m"])])
    b = _trace(
        tmp_path / "b",
        [*HEAD, _op("aten::view", ["r"], ["v"]), _op("aten::add", ["v", "s"], ["m2"])],
    )
    d = read_traces(a, b, 0)
    assert d is not None and d.role == "structural" and d.name == "aten::mul"
    assert d.in_b == ("", "aten::add", 0)  # the view passed over: it only aliases


def test_where_a_runs_ops_b_skips_b_goes_on_with_its_next_op(tmp_path: Path):
    norm = [_op("aten::linalg_vector_norm", ["r"], ["n"]), _op("aten::stack", ["n"], ["ns"])]
    tail = [_op("aten::add", ["c", "e"], ["ce"]), _op("aten::clamp", ["ce"], ["k"])]
    a = _trace(tmp_path / "a", [*HEAD, *norm, *tail])
    b = _trace(tmp_path / "b", [*HEAD, *tail])
    d = read_traces(a, b, 0)
    assert d is not None and d.role == "structural" and d.name == "aten::linalg_vector_norm"
    assert d.in_b == ("", "aten::add", 0)

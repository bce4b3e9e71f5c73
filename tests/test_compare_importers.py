"""Foreign formats land in the same event model and compare like native traces."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from triage_agent.compare import compare_runs, load_pair, load_run
from triage_agent.compare.errors import MalformedTraceError
from triage_agent.compare.importers import detect

FIX = Path(__file__).parent / "fixtures" / "compare"


def test_bridge_streams_collective_origin_and_receiver():
    a, b = load_run(FIX / "bridge" / "run_a"), load_run(FIX / "bridge" / "run_b")
    assert a.fmt == "bridge" and sorted(a.ranks) == [0, 1]
    res = compare_runs(a, b)
    for r in res.ranks:
        assert r.origin.a.name == "all_reduce" and r.origin.a.step == 1
        assert "collective" in {lb.code for lb in r.origin.labels}
    assert res.summary.origin_ranks == [0, 1]


def test_megatron_lm_traces_first_observed_in_execution_order():
    a, b = load_run(FIX / "megatron_lm" / "run_a"), load_run(FIX / "megatron_lm" / "run_b")
    assert detect(FIX / "megatron_lm" / "run_a") == "megatron-lm"
    res = compare_runs(a, b)
    r0, r1 = res.ranks
    assert r0.status == "identical"
    assert r1.first_divergence.role == "observed" and r1.origin is None
    e = r1.first_divergence.a
    assert (e.step, e.scope, e.name) == (2, "mb1", "module_output:decoder.layers.0")


def test_megatron_lm_torn_last_line(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(FIX / "megatron_lm" / "run_a", d)
    f = d / "rank_000001.jsonl"
    f.write_text(f.read_text()[:-30])
    run = load_run(d)
    assert any("torn last line" in w for w in run.warnings)
    assert len(run.ranks[1]) == 11


@pytest.mark.parametrize("gz", [False, True])
def test_chrome_single_file_holds_both_runs(tmp_path, gz):
    path = FIX / "opguard_pair.json"
    if gz:
        path = tmp_path / "pair.json.gz"
        path.write_bytes(gzip.compress((FIX / "opguard_pair.json").read_bytes()))
    a, b = load_pair(path)
    assert (a.run_id, b.run_id) == ("reference", "suspect")
    assert any("no io signature" in w for w in a.warnings)
    r = compare_runs(a, b).ranks[0]
    assert r.origin.a.scope == "model.fc2" and r.origin.a.name == "aten::linear"


def test_chrome_malformed_json_names_line(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [\n{"ph": "X",\n]}')
    with pytest.raises(MalformedTraceError, match=r"t\.json:3"):
        load_run(p, "chrome")


def _debugmode_log(path: Path, perturb: bool) -> None:
    import torch
    from torch.utils._debug_mode import DebugMode

    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    with DebugMode() as dm, DebugMode.log_tensor_hashes(hash_inputs=True):
        y = lin(x)
        # the same ops in both runs; one op's output differs while its inputs are equal
        y = y.relu() + torch.full_like(y, 1e-7 if perturb else 0.0)
        y.sum()
    path.write_text(dm.debug_string())


def test_debugmode_real_logs_origin_at_the_perturbed_op(tmp_path):
    _debugmode_log(tmp_path / "a.log", False)
    _debugmode_log(tmp_path / "b.log", True)
    assert detect(tmp_path / "a.log") == "debugmode"
    res = compare_runs(load_run(tmp_path / "a.log"), load_run(tmp_path / "b.log"))
    r = res.ranks[0]
    assert r.origin is not None
    assert r.origin.a.name in ("aten::full_like", "aten::full")
    # the ops before it (linear, relu) were paired and equal
    assert r.origin.a.index >= 2


def test_detect_rejects_unknown(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("hello\n")
    with pytest.raises(Exception, match="format not recognised"):
        load_run(p)
    assert json.loads((FIX / "opguard_pair.json").read_text())["traceEvents"]


def test_bridge_non_integer_seq_id_names_the_line(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIX / "bridge" / "run_a", run)
    f = run / "stream_pp0_tp0_cp0_dp0.fp"
    lines = f.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if '"align_idx"' in line)
    rec = json.loads(lines[k])
    rec["seq_id"] = "x"
    lines[k] = json.dumps(rec)
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(MalformedTraceError, match=rf":{k + 1}: seq_id must be an integer"):
        load_run(run)


@pytest.mark.parametrize("replace", [r"\9", r"\g<nope>"])
def test_map_rule_with_a_bad_group_reference_is_refused_at_load(tmp_path, replace):
    from triage_agent.compare.mapping import load_mapping
    from triage_agent.errors import InputError

    m = tmp_path / "map.json"
    m.write_text(json.dumps({"rule": [{"pattern": "^a(b)", "replace": replace}]}))
    with pytest.raises(InputError, match="not a valid replacement"):
        load_mapping(m)


def test_a_collective_origin_is_received_when_a_peer_entered_it_already_different(tmp_path):
    # rank 1 of run B computes its add of step 1 otherwise (equal input, different output),
    # so its all_reduce input differs; rank 0 sees equal inputs and a different result
    shutil.copytree(FIX / "bridge", tmp_path / "bridge")
    r1 = tmp_path / "bridge" / "run_b" / "stream_pp0_tp0_cp0_dp1.fp"
    lines = r1.read_text().splitlines()
    for i, line in enumerate(lines):
        ev = json.loads(line)
        if ev.get("window") == 1 and ev.get("op") == "add":
            ev["output"][0]["hash"] += "X"
        if ev.get("window") == 1 and ev.get("op") == "all_reduce":
            ev["input"][0]["hash"] += "X"
        lines[i] = json.dumps(ev)
    r1.write_text("\n".join(lines) + "\n")
    res = compare_runs(
        load_run(tmp_path / "bridge" / "run_a"), load_run(tmp_path / "bridge" / "run_b")
    )
    r0, r1_res = res.ranks
    assert r1_res.origin is not None and r1_res.origin.a.name == "add"
    assert r0.origin is None  # received through the all_reduce, not made there
    assert any("rank(s) [1] had already diverged" in n for n in r0.notes)
    assert res.summary.origin_ranks == [1]

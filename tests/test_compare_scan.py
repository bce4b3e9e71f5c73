"""The block scan agrees with event-by-event decoding, and the forked pair load with two
sequential loads (results, warnings and errors)."""

from __future__ import annotations

import json
import pickle
import random

import pytest
from test_compare_support import chain, write_trace

from triage_agent.compare import compare_runs, load_run, load_runs, parallel, scan
from triage_agent.compare.errors import MalformedTraceError
from triage_agent.compare.model import body_hash
from triage_agent.compare.reader import read_rank_file

ODD = [
    '{"type": "step_end", "step": 0, "events": 1}',
    '{"type":"event","seq":3,"step":0,"kind":"op","name":"x","inputs":[],"outputs":[],"dump":null}',
    '{"step": 0, "seq": 2, "kind": "op", "name": "no-type"}',
    '{"type": "event", "seq": 1, "kind": "op", "step": 0, "name": "reordered-keys"}',
    '{"type": "event", "seq": 1, "step": 0, "kind": "op", "name": "w", "meta": {"dump": 1},'
    ' "dump": null}',
    '{"type": "event", "seq": ' + "9" * 40 + ', "step": 0, "kind": "op", "name": "long-seq"}',
]


def _mixed_trace(tmp_path, rng: random.Random, torn: bool):
    path = write_trace(tmp_path / "run", chain(60), end=False)
    lines = path.read_text().splitlines()
    body = lines[1:]
    for _ in range(8):
        body.insert(rng.randint(0, len(body)), rng.choice(ODD))
    text = "\n".join([lines[0], *body, '{"type": "end"}']) + "\n"
    if torn:
        text += '{"type": "event", "seq": 99, "st'
    path.write_text(text)
    return path


@pytest.mark.parametrize("block", [64, 700, 1 << 24])
@pytest.mark.parametrize("torn", [False, True])
def test_scan_hashes_and_lines_match_decoding(tmp_path, monkeypatch, block, torn):
    monkeypatch.setattr(scan, "BLOCK", block)
    path = _mixed_trace(tmp_path, random.Random(block + torn), torn)
    fast, warns = read_rank_file(path)
    slow, swarns = read_rank_file(path, strict=True)
    assert warns == swarns
    text = path.read_text().splitlines()
    n_events = sum(1 for t in text[1:] if '"step_end"' not in t and '"end"' not in t)
    assert len(fast) == len(slow) == n_events - torn
    assert fast.clean_end and (fast.truncated_at is not None) == torn
    for i in range(len(fast)):
        e = fast.event(i)
        assert e == slow.event(i)
        assert json.loads(text[e.line - 1])["seq"] == e.seq
    # equal bodies hash equal, different bodies differently, whatever the layout
    for i in range(len(fast) - 1):
        same = body_hash(slow.event(i)) == body_hash(slow.event(i + 1))
        assert (int(fast.hashes()[i]) == int(fast.hashes()[i + 1])) == same


def test_scan_reports_the_first_bad_line(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "BLOCK", 64)
    path = write_trace(tmp_path / "run", chain(20))
    lines = path.read_text().splitlines()
    lines[7] = '{"type": "event", "seq": 6, "step": "x", "kind": "op"}'
    lines[12] = "not json"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MalformedTraceError, match=r":8: invalid trace event"):
        read_rank_file(path)


def test_stream_pickles_and_maps_its_file_again(tmp_path):
    path = write_trace(tmp_path / "run", chain(30, diverge=5))
    stream, _ = read_rank_file(path)
    copy = pickle.loads(pickle.dumps(stream))
    assert [copy.event(i) for i in range(30)] == [stream.event(i) for i in range(30)]


def test_forked_pair_load_equals_two_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    a = write_trace(tmp_path / "a", chain(200)).parent
    bev = chain(200, diverge=150)
    del bev[40]
    b = write_trace(tmp_path / "b", bev, end=False).parent
    assert parallel.worth_forking(a, b)
    pa, pb = load_runs(a, b)
    sa, sb = load_run(a), load_run(b)
    assert pa.warnings == sa.warnings and pb.warnings == sb.warnings
    assert list(pa.ranks[0].hashes()) == list(sa.ranks[0].hashes())
    got, want = compare_runs(pa, pb), compare_runs(sa, sb)
    assert got.model_dump() == want.model_dump()
    assert got.ranks[0].origin.a.index == 150


def test_forked_pair_load_raises_the_childs_error(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    a = write_trace(tmp_path / "a", chain(20))
    b = write_trace(tmp_path / "b", chain(20)).parent
    lines = a.read_text().splitlines()
    lines[2] = "not json"
    a.write_text("\n".join(lines) + "\n")
    with pytest.raises(MalformedTraceError, match=r"a/trace_rank00000.jsonl:3: not valid JSON"):
        load_runs(a.parent, b)

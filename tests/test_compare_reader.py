"""The fast native reader agrees with the pydantic trace models, and bad input is named."""

from __future__ import annotations

import json
import random

import pytest
from test_compare_support import chain, write_trace

from triage_agent.compare import compare_runs, load_run
from triage_agent.compare.decode import fast_event
from triage_agent.compare.errors import MalformedTraceError, SchemaVersionError
from triage_agent.compare.model import ev_from_model
from triage_agent.compare.reader import read_rank_file
from triage_agent.trace_format import TraceEvent


def _random_event(rng: random.Random, seq: int) -> TraceEvent:
    def dig():
        if rng.random() < 0.1:
            return None
        return {
            "shape": [rng.randint(0, 9) for _ in range(rng.randint(0, 3))],
            "dtype": rng.choice(["float32", "bfloat16", "int64"]),
            "numel": rng.randint(0, 99),
            "digest": f"{rng.getrandbits(64):016x}",
            "order": rng.choice([None, f"{rng.getrandbits(32):08x}"]),
        }

    return TraceEvent(
        seq=seq,
        step=rng.randint(-1, 5),
        kind=rng.choice(["op", "module", "collective", "optimizer", "metric"]),
        name=rng.choice(["aten::mm", 'we"ird\\name', "ünïcode", "all_reduce"]),
        scope=rng.choice(["", "layers.0", "a\tb"]),
        call=rng.randint(0, 4),
        phase=rng.choice(["forward", "backward", "optimizer", "other"]),
        caller=rng.choice([None, "train.py:12"]),
        inputs=[dig() for _ in range(rng.randint(0, 3))],
        outputs=[dig() for _ in range(rng.randint(0, 2))],
        dump=rng.choice([None, "dumps/x.pt"]),
        meta=rng.choice([{}, {"async": True, "waited": True}, {"dump": "in meta"}]),
    )


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("strict", [False, True])
def test_reader_decodes_what_pydantic_decodes(tmp_path, compact, strict):
    rng = random.Random(7)
    models = [_random_event(rng, i) for i in range(300)]
    path = tmp_path / "trace_rank00000.jsonl"
    with open(path, "w") as fh:
        fh.write(json.dumps({"type": "header", "run_id": "r", "rank": 0, "created": "t"}) + "\n")
        for m in models:
            fh.write((m.model_dump_json() if compact else json.dumps(m.model_dump())) + "\n")
        fh.write('{"type": "end"}\n')
    stream, warns = read_rank_file(path, strict=strict)
    assert warns == []
    assert len(stream) == len(models)
    for i, m in enumerate(models):
        got = stream.event(i)
        want = ev_from_model(m, i, i + 2)
        assert got == want


def test_reader_lax_values_decode_as_pydantic_does(tmp_path):
    e = dict(chain(3)[1], seq="1", call=1.0)
    path = write_trace(tmp_path / "a", chain(3))
    lines = path.read_text().splitlines()
    lines[2] = json.dumps(e)
    path.write_text("\n".join(lines) + "\n")
    got = load_run(tmp_path / "a", strict=True).ranks[0].event(1)
    assert got == ev_from_model(TraceEvent.model_validate(e), 1, 3)
    assert (got.seq, got.call) == (1, 1)


BAD = [
    {"kind": "bogus"},
    {"seq": 1.5},
    {"extra_field": 1},
    {"inputs": [{"shape": [2], "dtype": "f", "numel": 2}]},
    {"inputs": [{"shape": ["two"], "dtype": "f", "numel": 2, "digest": "d"}]},
    {"outputs": {"not": "a list"}},
    {"phase": "sideways"},
    {"meta": []},
    {"name": None},
    {"type": "evnt"},
]


@pytest.mark.parametrize("patch", BAD)
def test_reader_rejects_what_pydantic_rejects_with_file_and_line(tmp_path, patch):
    events = chain(5)
    good = dict(events[2])
    bad = {**good, **patch}
    with pytest.raises(Exception):  # noqa: B017 - the model must reject it too
        TraceEvent.model_validate(bad)
    assert not fast_event(bad)
    path = write_trace(tmp_path / "r", events)
    lines = path.read_text().splitlines()
    lines[3] = json.dumps(bad)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MalformedTraceError, match=r"trace_rank00000\.jsonl:4"):
        run = load_run(tmp_path / "r", strict=True)
    # the fast path catches it too once the line matters (here: it differs from run B)
    write_trace(tmp_path / "b", events)
    with pytest.raises(MalformedTraceError, match=r":4"):
        run = load_run(tmp_path / "r")
        compare_runs(run, load_run(tmp_path / "b"))


def test_reader_torn_last_line_compares_up_to_it(tmp_path):
    events = chain(10)
    write_trace(tmp_path / "a", events)
    path = write_trace(tmp_path / "b", events, end=False)
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # cut the last event mid-line
    rb = load_run(tmp_path / "b")
    assert len(rb.ranks[0]) == 9
    res = compare_runs(load_run(tmp_path / "a"), rb)
    assert not res.complete
    assert any("torn last line" in w and ":11" in w for w in res.warnings)
    r = res.ranks[0]
    assert [u.reason for u in r.unmatched] == ["after-truncation"]
    assert r.unmatched[0].event.index == 9
    assert res.status == "identical"


def test_reader_torn_line_in_the_middle_is_malformed(tmp_path):
    path = write_trace(tmp_path / "a", chain(6))
    lines = path.read_text().splitlines()
    lines[2] = lines[2][:30]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MalformedTraceError, match=":3"):
        load_run(tmp_path / "a", strict=True)


def test_reader_schema_version_mismatch(tmp_path):
    # version 1 recorded the xor digest of integer tensors where version 2 records the order one
    write_trace(tmp_path / "a", chain(3), version=1)
    with pytest.raises(SchemaVersionError, match=r"trace_rank00000\.jsonl:1.*version 1"):
        load_run(tmp_path / "a")


def test_reader_gzip_and_single_file(tmp_path):
    import gzip

    p = write_trace(tmp_path / "a", chain(8, diverge=None))
    gz = tmp_path / "g" / "trace_rank00000.jsonl.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(p.read_bytes()))
    write_trace(tmp_path / "b", chain(8, diverge=5))
    res = compare_runs(load_run(gz.parent), load_run(tmp_path / "b" / "trace_rank00000.jsonl"))
    assert res.ranks[0].origin is not None and res.ranks[0].origin.a.index == 5

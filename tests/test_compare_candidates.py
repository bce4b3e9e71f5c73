"""First-divergence candidates (events one run executes and the other does not, ordered with
the origin) and producer links (where each differing input of a receiver came from)."""

from __future__ import annotations

import json
import sys

import pytest
from test_compare_support import ev, write_trace

from triage_agent.cli.app import main
from triage_agent.compare import compare_runs, load_run, to_markdown
from triage_agent.compare.classify import state_write
from triage_agent.compare.model import Ev
from triage_agent.compare.synth import SynthSpec, write_pair


def _compare(tmp_path, ea, eb):
    write_trace(tmp_path / "a", ea)
    write_trace(tmp_path / "b", eb)
    return compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b"))


def _stray_update_pair():
    """B takes an optimizer step during initialisation that A never takes; a slice that
    reads the weight without recording it then looks like an origin."""
    ea = [
        ev(0, "Linear", ["x", "w0"], ["y0"], scope="model.0", kind="module"),
        ev(1, "aten::slice.Tensor", ["x"], ["s0"], scope="model.1"),
    ]
    eb = [
        ev(
            0,
            "SGD",
            ["w0"],
            ["w1"],
            scope="model.0.weight",
            kind="optimizer",
            phase="optimizer",
            caller="train.py:42",
        ),
        ev(1, "Linear", ["x", "w1"], ["y1"], scope="model.0", kind="module"),
        ev(2, "aten::slice.Tensor", ["x"], ["s1"], scope="model.1"),
    ]
    return ea, eb


def test_candidates_stray_optimizer_step_comes_before_the_origin_with_its_call_site(tmp_path):
    res = _compare(tmp_path, *_stray_update_pair())
    r = res.ranks[0]
    first, last = r.candidates[0], r.candidates[-1]
    assert (first.kind, first.run, first.event_kind, first.step) == ("extra", "b", "optimizer", 0)
    assert first.writes_state and first.call_site == "train.py:42"
    assert first.event == "model.0.weight::SGD"
    assert last.kind == "origin" and last.event == "model.1::aten::slice.Tensor"
    assert [c.order for c in r.candidates] == sorted(c.order for c in r.candidates)
    assert r.structural_candidates == r.candidates[:1]
    # the unmatched event is the first divergence, by its own name: never "structural"
    assert r.first_divergence.role == "extra" and r.first_divergence.b.caller == "train.py:42"
    assert res.summary.unmatched_first_ranks == [0]
    assert "only B executes optimizer step (SGD)" in res.summary.note
    assert "train.py:42" in res.summary.note


def test_producers_link_a_receivers_differing_input_to_the_event_that_wrote_it(tmp_path):
    r = _compare(tmp_path, *_stray_update_pair()).ranks[0]
    recv = r.first_receiver
    assert recv is not None and recv.role == "receiver" and recv.differing_inputs == [1]
    by_run = {p.run: p for p in recv.producers}
    assert by_run["b"].event is not None and by_run["b"].event.name == "SGD"
    assert by_run["b"].event.index == 0 and by_run["b"].output == 0
    assert by_run["b"].event.caller == "train.py:42"
    # A's weight was never written by a traced event: the edge of the capture, said as such
    assert by_run["a"].event is None and by_run["a"].searched == 0


def test_candidates_from_synthesized_stray_update_and_producers(tmp_path):
    spec = SynthSpec(events=600, steps=2, update_at=[250])
    a, b = write_pair(spec, tmp_path)
    r = compare_runs(load_run(a), load_run(b)).ranks[0]
    assert r.origin is None
    (c,) = r.candidates
    assert c.kind == "extra" and c.writes_state and c.call_site == "train.py:350"
    assert c.b.index == 250 and 249 < c.order < 250
    p = {x.run: x for x in r.first_receiver.producers}
    assert p["b"].event.index == 250 and p["b"].event.kind == "optimizer"
    assert p["a"].event.index == 249  # A's own previous op wrote its input
    assert r.first_receiver.a.index == 250


def test_candidates_stop_at_the_origin_and_keep_events_that_only_compute(tmp_path):
    a, b = write_pair(SynthSpec(events=400, diverge_at=120, insert_at=[30, 300]), tmp_path)
    r = compare_runs(load_run(a), load_run(b)).ranks[0]
    assert [c.kind for c in r.candidates] == ["extra", "origin"]
    clone = r.candidates[0]
    assert clone.event.endswith("aten::clone") and not clone.writes_state
    assert clone.state_write == "" and r.candidates[1].a.index == 120
    assert r.candidates_total == 2


def test_candidates_missing_collective_is_a_state_write_of_run_a(tmp_path):
    ea = [
        ev(0, "mm", ["x"], ["p"]),
        ev(1, "all_reduce", ["p"], ["p2"], kind="collective", caller="zero.py:7"),
        ev(2, "add", ["p2"], ["q"]),
    ]
    eb = [ev(0, "mm", ["x"], ["p"]), ev(1, "add", ["p"], ["q'"])]
    r = _compare(tmp_path, ea, eb).ranks[0]
    c = r.candidates[0]
    assert (c.kind, c.run, c.call_site) == ("missing", "a", "zero.py:7")
    assert c.writes_state and c.state_write.startswith("collective all_reduce")
    assert r.first_divergence.role == "missing"
    p = {x.run: x for x in r.first_receiver.producers}
    assert p["a"].event.name == "all_reduce" and p["b"].event.name == "mm"


def test_candidates_cap_keeps_every_state_writer(tmp_path):
    ea = [ev(0, "mm", ["x"], ["p"], scope="s")]
    eb = [ev(k, "clone", ["x"], [f"c{k}"], scope=f"x{k}") for k in range(150)]
    eb += [
        ev(150 + k, "add_", ["x"], [f"w{k}"], scope=f"w{k}", caller=f"t.py:{k}") for k in range(3)
    ]
    eb.append(ev(153, "mm", ["x"], ["p"], scope="s"))
    r = _compare(tmp_path, ea, eb).ranks[0]
    assert r.candidates_total == 153 and len(r.candidates) == 100
    assert sum(c.writes_state for c in r.candidates) == 3
    assert [c.order for c in r.candidates] == sorted(c.order for c in r.candidates)


def _ev(name: str, kind: str = "op") -> Ev:
    return Ev(0, 0, 0, kind, name, "", 0, "forward", None, (), (), None, {}, 1)


@pytest.mark.parametrize(
    ("name", "kind", "writes"),
    [
        ("aten::add_.Tensor", "op", True),
        ("aten::copy_", "op", True),
        ("aten::_foreach_mul_.Scalar", "op", True),
        ("aten.add.out", "op", True),
        ("Adam", "optimizer", True),
        ("all_reduce", "collective", True),
        ("aten::addmm", "op", False),
        ("aten::slice.Tensor", "op", False),
        ("aten::_to_copy", "op", False),
        ("Linear", "module", False),
    ],
)
def test_state_write_names_what_an_event_writes(name, kind, writes):
    assert bool(state_write(_ev(name, kind))) is writes


def _cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["triage", "compare", *map(str, args)])
    with pytest.raises(SystemExit):
        main()
    return capsys.readouterr().out


def test_candidates_shown_by_table_md_and_json(tmp_path, monkeypatch, capsys):
    res = _compare(tmp_path, *_stray_update_pair())
    md = to_markdown(res)
    assert "**First-divergence candidates**" in md
    assert "| 1 | extra | B | 0 | `model.0.weight::SGD` | optimizer | train.py:42 |" in md
    assert "**First receiver**" in md and "output 0 of SGD" in md
    a, b = tmp_path / "a", tmp_path / "b"
    doc = json.loads(_cli(monkeypatch, capsys, a, b, "--format", "json"))
    c0 = doc["ranks"][0]["candidates"][0]
    assert c0["call_site"] == "train.py:42" and c0["writes_state"] is True
    assert doc["schema_id"] == "bitwise-triage.compare/2"
    out = _cli(monkeypatch, capsys, a, b)
    assert "1. only B executes optimizer step (SGD) at model.0.weight::SGD" in out
    assert "from train.py:42" in out and "2. origin" in out


STRAY_WRITE = """
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(3, 4)
for s in range(3):
    if sys.argv[1] == "b" and s == 1:
        with torch.no_grad():
            m[0].weight.add_(1e-3)  # a write only run B makes
    m(x).pow(2).sum().backward(); opt.step(); opt.zero_grad()
"""


def test_candidates_real_op_trace_names_the_stray_in_place_write_and_walks_upstream(tmp_path):
    from triage_agent.fingerprint import CaptureConfig, capture_command

    train = tmp_path / "train.py"
    train.write_text(STRAY_WRITE)
    for run in ("a", "b"):
        cfg = CaptureConfig(out_dir=tmp_path / run, steps=(0, 2), level="op")
        res = capture_command([sys.executable, str(train), run], cfg, timeout_s=120)
        assert res.exit_code == 0, res.warnings
    r = compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b")).ranks[0]
    c = r.candidates[0]
    assert (c.kind, c.run, c.step, c.writes_state) == ("extra", "b", 1, True)
    assert c.event.endswith("aten::add_.Tensor")
    # the weight's first reader in step 1: A got it from step 0's optimizer step (whose call
    # site the tracer records), B from the stray write
    p = {x.run: x for x in r.first_receiver.producers}
    assert r.first_receiver.a.step == 1
    assert p["a"].event.kind == "optimizer" and p["a"].event.caller.endswith("train.py:11")
    assert p["b"].event.index == c.b.index

"""Alignment and first-divergence classification on streams with planted ground truth."""

from __future__ import annotations

import pytest
from test_compare_support import chain, dg, ev, write_receiver_only_pair, write_trace

from triage_agent.compare import compare_runs, load_run
from triage_agent.compare.errors import IncompatibleRunsError
from triage_agent.compare.synth import SynthSpec, write_pair


@pytest.mark.parametrize(
    "spec",
    [
        SynthSpec(events=3000, steps=2, diverge_at=2500, insert_at=[400], delete_at=[1200]),
        SynthSpec(events=3000, steps=3, diverge_at=10, insert_at=[5, 2999], delete_at=[]),
        SynthSpec(events=2000, steps=1, diverge_at=1999, insert_at=[], delete_at=[0, 7, 1500]),
    ],
)
def test_align_finds_planted_origin_and_every_unmatched_event(tmp_path, spec):
    a, b = write_pair(spec, tmp_path)
    res = compare_runs(load_run(a), load_run(b))
    r = res.ranks[0]
    assert res.status == "diverged"
    assert r.origin is not None and r.origin.role == "origin"
    assert r.origin.a.index == spec.diverge_at
    assert r.origin.inputs_equal and r.origin.differing_outputs == [0]
    extra = sorted(u.event.name for u in r.unmatched if u.reason == "extra")
    missing = sorted(u.event.index for u in r.unmatched if u.reason == "missing")
    assert extra == ["aten::clone"] * len(spec.insert_at)
    assert missing == sorted(spec.delete_at)
    assert r.matched + len(missing) == r.events_a
    assert r.matched + len(extra) == r.events_b
    # every receiver after the origin is counted, none is skipped
    assert r.differing == spec.events - spec.diverge_at - sum(
        1 for d in spec.delete_at if d > spec.diverge_at
    )


def test_align_identical_runs(tmp_path):
    a, b = write_pair(SynthSpec(events=500), tmp_path)
    res = compare_runs(load_run(a), load_run(b))
    assert res.status == "identical" and res.complete
    assert res.ranks[0].alignment == "exact" and res.ranks[0].matched == 500


def test_first_divergence_is_first_executed_not_first_sorted(tmp_path):
    # scope "z" runs before scope "a": a key sort would pick "a" first
    ea = [ev(0, "mm", ["x"], ["p"], scope="z"), ev(1, "mm", ["p"], ["q"], scope="a")]
    eb = [ev(0, "mm", ["x"], ["p!"], scope="z"), ev(1, "mm", ["p!"], ["q!"], scope="a")]
    write_trace(tmp_path / "a", ea)
    write_trace(tmp_path / "b", eb)
    r = compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b")).ranks[0]
    assert r.origin.a.scope == "z" and r.first_divergence.role == "origin"


def test_receiver_only_rank_is_outside_scope_with_what_to_widen(tmp_path):
    a, b = write_receiver_only_pair(tmp_path)
    res = compare_runs(load_run(a), load_run(b))
    r = res.ranks[0]
    assert r.origin is None and r.first_divergence.role == "receiver"
    assert r.outside_scope is not None and "before step 0" in r.outside_scope.steps
    assert res.summary.outside_scope_ranks == [0]


def _pair(tmp_path, ea, eb):
    write_trace(tmp_path / "a", ea)
    write_trace(tmp_path / "b", eb)
    return compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b")).ranks[0]


def test_label_view_means_uncaptured_kernel_upstream(tmp_path):
    ea = [ev(0, "aten::mm", ["x"], ["y"]), ev(1, "aten::view", ["y"], ["v"])]
    eb = [ev(0, "aten::mm", ["x"], ["y"]), ev(1, "aten::view", ["y"], ["v!"])]
    r = _pair(tmp_path, ea, eb)
    assert [lb.code for lb in r.origin.labels] == ["uncaptured-upstream"]


def test_label_empty_is_probe_artifact_and_walk_continues(tmp_path):
    ea = [ev(0, "aten::empty", [], ["e1"]), ev(1, "aten::mm", ["x"], ["y"])]
    eb = [ev(0, "aten::empty", [], ["e2"]), ev(1, "aten::mm", ["x"], ["y!"])]
    r = _pair(tmp_path, ea, eb)
    assert [d.a.name for d in r.artifacts] == ["aten::empty"]
    assert r.origin.a.name == "aten::mm"


def test_label_async_destination_read_before_wait(tmp_path):
    meta = {"async": True, "waited": False}
    ea = [ev(0, "all_reduce", ["g"], ["r1"], kind="collective", meta=meta)]
    eb = [ev(0, "all_reduce", ["g"], ["r2"], kind="collective", meta=meta)]
    r = _pair(tmp_path, ea, eb)
    assert r.origin is None and r.artifacts and r.status == "identical"


def test_label_possible_race_and_collective(tmp_path):
    after_a = {"inputs_after": [dg("g")]}
    after_b = {"inputs_after": [dg("g-written")]}
    ea = [ev(0, "all_reduce", ["g"], ["r"], kind="collective", meta=after_a)]
    eb = [ev(0, "all_reduce", ["g"], ["r!"], kind="collective", meta=after_b)]
    r = _pair(tmp_path, ea, eb)
    assert {lb.code for lb in r.origin.labels} == {"possible-race", "collective"}


def test_mapping_applied_before_alignment(tmp_path):
    ea = [ev(0, "mm", ["x"], ["y"], scope="module.layers.0.dense_h_to_4h")]
    eb = [ev(0, "mm", ["x"], ["y"], scope="decoder.layers.0.linear_fc1")]
    write_trace(tmp_path / "a", ea)
    write_trace(tmp_path / "b", eb)
    ra, rb = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    unmapped = compare_runs(ra, rb)
    assert unmapped.status == "diverged" and unmapped.ranks[0].unmatched_total == 2
    mapped = compare_runs(ra, rb, mapping="tests/fixtures/compare/mapping.toml")
    assert mapped.status == "identical" and mapped.ranks[0].matched == 1


def test_reordered_scopes_are_paired_and_reported(tmp_path):
    ea = [ev(0, "mm", ["x"], ["y"], scope="s1"), ev(1, "mm", ["x"], ["z"], scope="s2")]
    eb = [ev(0, "mm", ["x"], ["z"], scope="s2"), ev(1, "mm", ["x"], ["y"], scope="s1")]
    r = _pair(tmp_path, ea, eb)
    assert r.matched == 2 and r.unmatched_total == 0
    assert any("different order" in n for n in r.notes)


def test_world_size_and_missing_rank(tmp_path):
    for rk in (0, 1):
        write_trace(tmp_path / "a", chain(4), rank=rk, world=2)
    write_trace(tmp_path / "b", chain(4), rank=0, world=1)
    res = compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b"))
    assert not res.complete
    assert any("world sizes differ" in w for w in res.warnings)
    assert [r.status for r in res.ranks] == ["identical", "only-in-a"]
    with pytest.raises(IncompatibleRunsError):
        compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b"), ranks=[1])


def test_cross_rank_summary_separates_origins_from_collective_receivers(tmp_path):
    # rank 0 differs at a compute op before any collective; rank 1's all_reduce then has
    # equal local inputs and another result: it receives rank 0's difference, no origin
    for rk, (a_out, b_out, kind, name) in enumerate(
        [("y", "y!", "op", "mm"), ("r", "r!", "collective", "all_reduce")]
    ):
        write_trace(tmp_path / "a", [ev(0, name, ["x"], [a_out], kind=kind)], rank=rk, world=2)
        write_trace(tmp_path / "b", [ev(0, name, ["x"], [b_out], kind=kind)], rank=rk, world=2)
    res = compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b"))
    assert res.summary.origin_ranks == [0]
    r1 = res.ranks[1]
    assert r1.origin is None and r1.first_divergence is not None
    assert any("rank(s) [0] had already diverged" in n for n in r1.notes)
    # with no compute origin anywhere, a collective origin on every rank stays an origin
    # and the summary names the reduction itself
    for rk in (0, 1):
        write_trace(
            tmp_path / "c", [ev(0, "all_reduce", ["x"], ["r"], kind="collective")], rank=rk, world=2
        )
        write_trace(
            tmp_path / "d",
            [ev(0, "all_reduce", ["x"], ["r!"], kind="collective")],
            rank=rk,
            world=2,
        )
    both = compare_runs(load_run(tmp_path / "c"), load_run(tmp_path / "d"))
    assert both.summary.origin_ranks == [0, 1]
    assert "reduction itself" in both.summary.note

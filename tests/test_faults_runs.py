"""Runs that fail: a rank that stops early is reported incomplete, never identical; a hung
rank's job is reaped whole at the timeout; a reproducer that leaves a SIGTERM-deaf daemon
leaves nothing running. The benchmark (benchmarks/faults.py --runs) adds the killed rank
and a complete run to compare against."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_compare_support import chain, dg, ev, write_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import faults  # noqa: E402
from triage_agent.compare import compare_runs, load_run  # noqa: E402
from triage_agent.compare.distributed import Executor, compare_paths  # noqa: E402


def test_a_rank_that_stopped_early_is_incomplete_never_identical(tmp_path):
    """Rank 1 of B stops after 6 of 12 events with no end record (killed, or hung and
    reaped): equal as far as it goes, it used to be reported 'identical'."""
    events = chain(12)
    for rank in (0, 1):
        write_trace(tmp_path / "a", events, rank=rank, world=2)
    write_trace(tmp_path / "b", events, rank=0, world=2)
    write_trace(tmp_path / "b", events[:6], rank=1, world=2, end=False)
    res = compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b"))
    assert not res.complete
    assert [r.status for r in res.ranks] == ["identical", "incomplete"]
    assert res.summary.identical_ranks == [0] and res.summary.incomplete_ranks == [1]


@pytest.mark.slow  # a real two-rank torchrun job: 30-60 s on a loaded 2-core machine
def test_a_hung_rank_is_reaped_at_the_timeout_and_reported_incomplete(tmp_path):
    """Two gloo ranks; rank 1 ignores SIGTERM and sleeps at step 3, rank 0 blocks in its
    all-reduce. `triage trace --timeout` ends the whole job; both ranks stopped early."""
    hung, trace = faults.trace_job(tmp_path, "hang", timeout_s=40)
    assert hung.left_running == [], hung
    assert hung.seconds < 40 + 60, hung
    code, ranks = faults.compare_ranks(trace, trace, tmp_path)
    assert code == 3 and ranks == {0: "incomplete", 1: "incomplete"}, (code, ranks, hung)


def test_a_reproducer_that_leaves_a_deaf_daemon_leaves_nothing_running(tmp_path):
    r = faults.reproducer_faults(tmp_path, timeout_s=2)
    assert r.detail == "timed out True" and r.left_running == [] and r.survived, r


def _steps(rank: int, steps: int, last_reduce: str | None = None) -> list[dict]:
    """Per step: two all-reduces of the gradients, then the optimizer's update of each.
    ``last_reduce``: one more all-reduce, of the next step, with that output (a peer died
    in it: gloo returns whatever the buffer held, or the rank was ended inside it)."""
    out, seq = [], 0
    for s in range(steps):
        for i in range(2):
            g = f"g{rank}.{s}.{i}"
            out.append(
                ev(seq, "all_reduce", [g], [f"sum{s}.{i}"], step=s, scope="", kind="collective")
            )
            seq += 1
        for i in range(2):
            out.append(
                ev(
                    seq,
                    f"group0.param{i}",
                    [f"p{s}.{i}", f"sum{s}.{i}"],
                    [f"p{s + 1}.{i}"],
                    step=s,
                    scope="SGD",
                    kind="optimizer",
                )
            )
            seq += 1
    if last_reduce is not None:
        g = f"g{rank}.{steps}.0"
        out.append(
            ev(seq, "all_reduce", [g], [last_reduce], step=steps, scope="", kind="collective")
        )
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_a_killed_peer_is_not_blamed_on_the_rank_that_survived_it(tmp_path, workers):
    """Rank 1 of B is killed at step 3; rank 0 of B is inside step 3's all-reduce, whose
    output is not a sum (its peer never sent one). That collective has equal inputs and a
    different output, which alone reads as an origin on rank 0: the comparison must instead
    stop rank 0 where its peer stopped, and report both ranks incomplete."""
    for rank in (0, 1):
        write_trace(tmp_path / "a", _steps(rank, 6), rank=rank, world=2)
    write_trace(tmp_path / "b", _steps(0, 3, last_reduce="g0.3.0"), rank=0, world=2, end=False)
    write_trace(tmp_path / "b", _steps(1, 3), rank=1, world=2, end=False)
    res = compare_paths(tmp_path / "a", tmp_path / "b", executor=Executor(workers=workers))
    assert [r.status for r in res.ranks] == ["incomplete", "incomplete"], res.ranks
    assert all(r.origin is None for r in res.ranks)
    assert res.summary.origin_ranks == [] and res.summary.incomplete_ranks == [0, 1]
    assert any("rank 1" in n for n in res.ranks[0].notes), res.ranks[0].notes


def test_a_divergence_before_the_peer_died_is_still_an_origin(tmp_path):
    """The same kill, but rank 0 of B updated a parameter differently in step 1, while its
    peer was alive: that is evidence, and stays the origin."""
    for rank in (0, 1):
        write_trace(tmp_path / "a", _steps(rank, 6), rank=rank, world=2)
    bad = _steps(0, 3, last_reduce="g0.3.0")
    bad[6] = dict(bad[6], outputs=[dg("p2.0!")])
    write_trace(tmp_path / "b", bad, rank=0, world=2, end=False)
    write_trace(tmp_path / "b", _steps(1, 3), rank=1, world=2, end=False)
    res = compare_paths(tmp_path / "a", tmp_path / "b")
    assert res.ranks[0].status == "diverged" and res.ranks[0].origin is not None
    assert res.ranks[0].origin.b.step == 1 and res.ranks[0].origin.b.name == "group0.param0"
    assert res.ranks[1].status == "incomplete"

"""Runs that fail: a rank that stops early is reported incomplete, never identical; a hung
rank's job is reaped whole at the timeout; a reproducer that leaves a SIGTERM-deaf daemon
leaves nothing running. The benchmark (benchmarks/faults.py --runs) adds the killed rank
and a complete run to compare against."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_compare_support import chain, write_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import faults  # noqa: E402
from triage_agent.compare import compare_runs, load_run  # noqa: E402


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

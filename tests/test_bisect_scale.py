"""A 1,000-commit history, one commit of which changes the bits: the bisection lands on it
within B's revision plus ceil(log2(1000)) = 10 probes, and proves it with at most 12
reruns of B in all (measured on the 2-core machine: see docs/bisect.md)."""

from __future__ import annotations

import pytest
from test_bisect_support import OPS, SIGMOID_ACT, make_case

from triage_agent.bisect import bisect_case
from triage_agent.ledger import Ledger

COMMITS = 1000
BAD = 637


def _history():
    for k in range(1, COMMITS + 1):
        if k == BAD:
            yield ("ops: sigmoid form of tanh", {"lib/ops.py": SIGMOID_ACT})
        else:
            yield (f"notes: entry {k}", {"NOTES.md": f"entry {k}\n"})


@pytest.mark.slow
def test_bisect_a_thousand_commits_in_at_most_twelve_reruns(tmp_path):
    assert OPS != SIGMOID_ACT
    case = make_case(tmp_path, list(_history()))
    res = bisect_case(case, Ledger(case.workspace))
    assert res.status == "found", res.message
    assert len(res.commits) == COMMITS
    assert res.first_bad.index == BAD and res.first_bad.subject.startswith("ops: sigmoid")
    assert res.probes_to_first_bad <= 1 + 10
    assert res.reruns <= 12, [q.tree for q in res.probes]
    assert [h.hunk.location for h in res.hunks] == ["lib/ops.py:7"]
    assert res.proof.outcome == "good"

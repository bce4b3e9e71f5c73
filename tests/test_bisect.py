"""Bisection end to end on real git histories (GitPython) and real reruns of a tiny
plain-torch job: a skipped commit and one bad commit; two interacting commits narrowed to
hunks; a bisection stopped by its budget and resumed from the ledger; a bad merge opened."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from test_bisect_support import (
    INTERACTING,
    ONE_BAD,
    make_case,
    make_merge_case,
    probe_launches,
)

from triage_agent.bisect import bisect_case
from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind, HypothesisStatus


def _subjects(commits) -> list[str]:
    return [c.subject for c in commits]


def test_bisect_skips_a_commit_that_does_not_run_and_lands_on_the_one_bad_commit(tmp_path):
    case = make_case(tmp_path, ONE_BAD)
    ledger = Ledger(case.workspace)
    res = bisect_case(case, ledger)

    assert res.status == "found", res.message
    assert res.mode == "source-dir"
    assert res.first_bad.subject == "ops: sigmoid form of tanh"
    # the commit whose import fails was probed and skipped, never called bad
    crash = next(c for c in res.commits if c.subject == "ops: import a helper")
    probed = {q.tree.base: q for q in res.probes if q.phase == "bisect"}
    assert probed[crash.sha].outcome == "skip" and "does not run" in probed[crash.sha].said
    assert _subjects(res.skipped) == ["ops: import a helper"]
    # B's own revision first, then at most ceil(log2(n)) probes plus one per skip
    n = len(res.commits)
    assert res.probes_to_first_bad <= 1 + math.ceil(math.log2(n)) + len(res.skipped)
    assert res.revert_first_bad.outcome == "good"
    assert _subjects(res.culprits) == ["ops: sigmoid form of tanh"]
    (hunk,) = res.hunks
    assert hunk.hunk.location == "lib/ops.py:7"
    assert "-    return torch.tanh(x)" in hunk.hunk.diff
    assert "+    return 2 * torch.sigmoid(2 * x) - 1" in hunk.hunk.diff
    assert hunk.alone.outcome == "good" and res.proof.outcome == "good"
    assert "for the reader" in res.message

    st = ledger.state()
    assert st.hypotheses[res.hypothesis].status == HypothesisStatus.supported
    proof = next(e for e in st.evidence if e.id == res.proof.evidence_id)
    assert proof.kind == EvidenceKind.rerun and proof.hypotheses == [res.hypothesis]
    assert proof.data.match["all_match"] is True and proof.result.value == "supported"
    # every probe is evidence, the skipped one an error (it did not run), never refuted
    recorded = {e.data.bisect.probe: e for e in st.evidence if getattr(e.data, "bisect", None)}
    assert {q.key for q in res.probes} == set(recorded)
    assert recorded[probed[crash.sha].key].result.value == "error"
    # the throwaway worktrees are gone; the user's checkouts are untouched
    assert not any(Path(p).exists() for p in probe_launches(tmp_path))
    import git

    assert len(git.Repo(tmp_path / "lib-repo").git.worktree("list").splitlines()) == 3
    assert not git.Repo(tmp_path / "run-b").is_dirty(untracked_files=True)


def test_bisect_two_interacting_commits_to_a_minimal_set_of_hunks(tmp_path):
    case = make_case(tmp_path, INTERACTING)
    ledger = Ledger(case.workspace)
    res = bisect_case(case, ledger)

    assert res.status == "found", res.message
    assert res.first_bad.subject == "ops: sigmoid form of tanh"
    # reverting the first bad commit alone does not restore A: another commit still moves bits
    assert res.revert_first_bad.outcome == "bad"
    assert _subjects(res.culprits) == [
        "ops: sigmoid form of tanh",
        "ops: scaled update, and a docstring",
    ]
    # of the second commit's two hunks only the arithmetic one is needed
    assert [h.hunk.location for h in res.hunks] == ["lib/ops.py:7", "lib/ops.py:19"]
    assert "(w / lr - g) * lr" in res.hunks[1].hunk.diff
    assert "see README" not in "".join(h.hunk.diff for h in res.hunks)
    # B with exactly those two hunks reverted matches A; neither hunk alone does
    assert res.proof.outcome == "good"
    assert set(res.proof.tree.revert_hunks) == {h.hunk.id for h in res.hunks}
    assert not res.proof.tree.revert_commits
    assert [h.alone.outcome for h in res.hunks] == ["bad", "bad"]
    assert res.hunks[0].alone.first_differing_step == 1  # the update still differs
    assert res.hunks[1].alone.first_differing_step == 0  # the activation still differs
    st = ledger.state()
    assert st.hypotheses[res.hypothesis].status == HypothesisStatus.supported
    alone_ids = {h.alone.evidence_id for h in res.hunks}
    assert alone_ids <= {e.id for e in st.evidence}


def test_bisect_stopped_by_its_budget_resumes_from_the_ledger_without_rerunning(tmp_path):
    case = make_case(tmp_path, ONE_BAD[3:])  # two commits: the bad one, then docs
    ledger = Ledger(case.workspace)
    first = bisect_case(case, ledger, budget_s=3)
    assert first.status == "stopped" and "resume" in first.message
    done = probe_launches(tmp_path)
    assert len(done) == len(first.probes) >= 1
    kept = ledger.path.read_bytes()

    # only the ledger can spare a probe now: the cached run outputs are gone
    shutil.rmtree(Path(case.workspace) / "runs")
    second = bisect_case(case, ledger)
    assert second.status == "found", second.message
    assert second.first_bad.subject == "ops: sigmoid form of tanh"
    assert ledger.path.read_bytes().startswith(kept)  # appended to, nothing lost
    again = probe_launches(tmp_path)[len(done) :]
    assert not set(again) & set(done), "a probe recorded before the stop was rerun"
    assert second.reused == len(first.probes) and second.reruns == len(again)

    third = bisect_case(case, ledger)
    assert probe_launches(tmp_path)[len(done) + len(again) :] == []
    assert third.reruns == 0 and third.reused == len(third.probes)
    assert third.proof.evidence_id == second.proof.evidence_id
    assert [h.hunk.id for h in third.hunks] == [h.hunk.id for h in second.hunks]


def test_bisect_opens_a_bad_merge_to_the_side_commit_that_moves_the_bits(tmp_path):
    case = make_merge_case(tmp_path)
    ledger = Ledger(case.workspace)
    res = bisect_case(case, ledger, hunks=False)
    assert res.status == "found", res.message
    assert [c.subject for c in res.commits[:4]] == [
        "notes: one",
        "notes: two",
        "merge side",
        "notes: three",
    ]
    assert res.first_bad_unit.subject == "merge side" and res.first_bad_unit.merge
    assert res.first_bad.subject == "side: sigmoid form of tanh"
    assert res.first_bad.side_of == res.first_bad_unit.sha
    side = [q for q in res.probes if q.tree.merge]
    assert {q.outcome for q in side} == {"good", "bad"}  # the note is good, the change bad
    assert _subjects(res.culprits) == ["merge side"] and res.proof.outcome == "good"
    assert "brought in by merge" in res.message
    # the hunks were not searched: the conclusion and the hypothesis say so and point at the
    # whole commit's diff, which the result does not hold
    assert not res.hunks and "hunk(s)" not in res.message
    statement = ledger.state().hypotheses[res.hypothesis].statement
    for text in (res.message, statement):
        assert "diff of each hunk" not in text and "hunks were not searched" in text, text
        assert f"git show {res.culprits[0].short}" in text, text


def test_bisect_with_hunks_after_one_without_reads_the_commit_probes_back(tmp_path):
    case = make_case(tmp_path, ONE_BAD[3:])
    ledger = Ledger(case.workspace)
    whole = bisect_case(case, ledger, hunks=False)
    assert whole.status == "found" and not whole.hunks
    done = probe_launches(tmp_path)

    narrowed = bisect_case(case, ledger)
    assert narrowed.status == "found" and [h.hunk.location for h in narrowed.hunks] == [
        "lib/ops.py:7"
    ]
    # the bisection and the revert are read back; only trees naming hunks are launched
    earlier = {q.key for q in whole.probes if q.phase in ("bisect", "revert")}
    reused = {q.key for q in narrowed.probes if not q.launched}
    assert earlier <= reused
    again = probe_launches(tmp_path)[len(done) :]
    keys = {Path(p).parent.parent.name for p in again}
    assert not keys & {q.key for q in whole.probes}, "a probe recorded before was launched again"
    assert all(q.tree.revert_hunks for q in narrowed.probes if q.launched)

"""The workflow's source-change fallback, on a real git repository (GitPython) whose later
revision adds one file, deletes another and changes the training script: bisection to the
hunk that moves the bits, how it is classified, and what a file revert refuses."""

from __future__ import annotations

import time
from pathlib import Path

import git
import pytest
from test_workflow_support import linear_train

from triage_agent.errors import InputError
from triage_agent.evidence_data import RerunData
from triage_agent.ledger import Ledger
from triage_agent.records import (
    Case,
    Classification,
    EvidenceResult,
    HypothesisStatus,
    RunSpec,
    SourceSpec,
)
from triage_agent.runs import materialize_case
from triage_agent.workflow.engine import validated_by_rerun
from triage_agent.workflow.fixcheck import (
    bisect_source_change,
    source_change_class,
    validate_revert,
)
from triage_agent.workflow.revisions import changed_files

PLAIN = linear_train(4, "pass")
NUDGED = linear_train(4, "if step == 2:\n            model.weight.data[0, 0] += 1e-3")


def _commit(repo: git.Repo, files: dict[str, str | None], msg: str) -> str:
    root = Path(repo.working_tree_dir)
    for name, text in files.items():
        if text is None:
            repo.index.remove([name], working_tree=True)
        else:
            (root / name).write_text(text)
            repo.index.add([name])
    actor = git.Actor("t", "t@example.com")
    return repo.index.commit(msg, author=actor, committer=actor).hexsha


@pytest.fixture
def update_case(tmp_path) -> Case:
    src = tmp_path / "src"
    src.mkdir()
    repo = git.Repo.init(src)
    rev_a = _commit(repo, {"train.py": PLAIN, "old_helpers.py": "Y = 1\n"}, "v1")
    # v2: the step changes, a module is added (imported by nothing), another deleted
    rev_b = _commit(
        repo,
        {"train.py": NUDGED, "extra.py": "X = 2\n", "old_helpers.py": None},
        "v2",
    )
    repo.git.worktree("add", "--detach", str(tmp_path / "wt_a"), rev_a)
    launch = [["{python}", "train.py", "{out}"]]
    return Case(
        name="update",
        workspace=str(tmp_path / "ws"),
        run_a=RunSpec(
            name="a",
            metrics="{out}",
            cwd=str(tmp_path / "wt_a"),
            launch=launch,
            source=SourceSpec(repo=str(src), rev=rev_a),
        ),
        run_b=RunSpec(
            name="b",
            metrics="{out}",
            cwd=str(src),
            launch=launch,
            source=SourceSpec(repo=str(src), rev=rev_b),
        ),
        timeout_s=120,
    )


def test_changed_files_names_added_deleted_and_modified(update_case):
    got = {c.path: c.change for c in changed_files(update_case)}
    assert got == {"train.py": "modified", "extra.py": "added", "old_helpers.py": "deleted"}


def test_git_trouble_is_a_one_line_error_not_an_empty_list(update_case, tmp_path):
    bad_rev = update_case.model_copy(deep=True)
    bad_rev.run_a.source.rev = "no-such-tag"
    with pytest.raises(InputError, match="does not resolve") as exc:
        changed_files(bad_rev)
    assert "\n" not in str(exc.value)
    no_repo = update_case.model_copy(deep=True)
    (tmp_path / "plain").mkdir()
    no_repo.run_b.source.repo = str(tmp_path / "plain")
    with pytest.raises(InputError, match="not inside a git repository"):
        changed_files(no_repo)


def test_a_revert_removes_a_file_b_added_and_restores_one_b_deleted(update_case):
    """A file B added has no content at A's revision: reverting it removes it (it does not end
    the revert as "not a checkout"), and the files after it are still taken back."""
    ledger = Ledger(update_case.workspace)
    ledger.record_case(update_case)
    base_a, _ = materialize_case(update_case, Path(update_case.workspace))
    files = ["extra.py", "old_helpers.py", "train.py"]
    ev = validate_revert(update_case, ledger, files, [], base_a.metrics, timeout_s=120)
    variant = Path(ev.data_as(RerunData).variant)
    assert not (variant / "extra.py").exists()
    assert (variant / "old_helpers.py").read_text() == "Y = 1\n"
    assert (variant / "train.py").read_text() == PLAIN
    # B with all three taken back is A's tree: every step then matches A
    assert ev.result == EvidenceResult.supported, ev.summary
    assert ev.data_as(RerunData).files == files


def test_a_revert_label_is_a_valid_run_id_for_long_odd_or_several_paths():
    from triage_agent.fingerprint.config import CaptureConfig
    from triage_agent.workflow.fixcheck import _revert_tag

    lists = [
        ["train.py"],
        ["a/" * 80 + "deep.py"],
        ["my file+ü.py"],
        ["a.py", "b.py"],
        ["a.py-b.py"],
    ]
    tags = [_revert_tag(files) for files in lists]
    for tag in tags:  # the run label is "<run>-<tag>"
        assert CaptureConfig(out_dir=".", run_id=f"b-{tag}").run_id == f"b-{tag}"
    assert len(set(tags)) == len(tags)


def test_the_workflow_bisects_to_the_hunk_and_classifies_by_the_comparison(update_case):
    """One commit changes three files; bisection and ddmin over its hunks keep only the
    training-script hunk, prove it, and name it with its diff; the runs are the same job at
    two revisions, so the proven change is a bug (a reader may declare it a policy)."""
    ledger = Ledger(update_case.workspace)
    ledger.record_case(update_case)
    found = bisect_source_change(
        update_case, ledger, timeout_s=120, deadline=time.monotonic() + 600
    )
    assert found is not None
    hyp = ledger.state().hypotheses[found.hypothesis.id]
    assert hyp.status == HypothesisStatus.supported and hyp.category == "source-change"
    assert hyp.classification == Classification.bug
    # the location is train.py at the nudge's line in B, with its outcomes; nothing else
    assert found.location.startswith("train.py:11 (") and "extra.py" not in found.location
    assert hyp.rationale.split(" ", 1)[0] == "train.py:11"
    assert "+        if step == 2:" in hyp.rationale and "for the reader" in hyp.rationale
    proof = validated_by_rerun(ledger, hyp.id)
    assert proof is not None and proof.model_dump(mode="json")["data"]["match"]["all_match"]
    # every probe ran in a throwaway worktree: the user's checkout is as it was
    assert git.Repo(update_case.run_b.cwd).git.status("--porcelain") == ""


def test_a_declared_setting_beside_the_source_leaves_the_class_unknown(update_case):
    ledger = Ledger(update_case.workspace)
    assert source_change_class(update_case, ledger) == Classification.bug
    other = update_case.model_copy(deep=True)
    other.run_b.env = {"TRIAGE_TEST_KNOB": "1"}
    assert source_change_class(other, Ledger(other.workspace)) == Classification.unknown


def test_a_revert_the_case_does_not_allow_is_said_not_skipped(update_case, tmp_path):
    ledger = Ledger(update_case.workspace)
    moved = update_case.model_copy(deep=True)
    moved.run_b.cwd = str(tmp_path / "wt_a")  # a checkout, but of A's revision
    with pytest.raises(InputError, match="not a checkout of run B's revision"):
        validate_revert(moved, ledger, "train.py", [], "unused", timeout_s=60)
    # a case whose revisions cannot be bisected ends the fallback with a note, never a crash
    bad = update_case.model_copy(deep=True)
    bad.run_a.source.rev = "no-such-tag"
    assert bisect_source_change(bad, ledger, timeout_s=60, deadline=1e12) is None
    assert any(
        "cannot be bisected" in n["text"] and "does not resolve" in n["text"]
        for n in ledger.state().notes
    )

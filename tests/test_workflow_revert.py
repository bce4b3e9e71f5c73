"""Reverting changed files one at a time, on a real git repository (GitPython) whose later
revision adds one file, deletes another and changes the training script."""

from __future__ import annotations

import time
from pathlib import Path

import git
import pytest

from triage_agent.errors import InputError
from triage_agent.ledger import Ledger
from triage_agent.records import Case, EvidenceKind, EvidenceResult, RunSpec, SourceSpec
from triage_agent.runs import materialize_case
from triage_agent.workflow.fixcheck import bisect_changed_files, validate_revert
from triage_agent.workflow.revisions import changed_files

TRAIN = """import sys
import torch
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(4):
        NUDGE
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""
PLAIN = TRAIN.replace("NUDGE", "pass")
NUDGED = TRAIN.replace("NUDGE", "if step == 2:\n            model.weight.data[0, 0] += 1e-3")


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


def test_added_and_deleted_files_are_reverted_and_the_loop_reaches_the_cause(update_case):
    ledger = Ledger(update_case.workspace)
    ledger.record_case(update_case)
    base_a, _ = materialize_case(update_case, Path(update_case.workspace))
    hyp = bisect_changed_files(
        update_case, ledger, base_a.metrics, timeout_s=120, deadline=time.monotonic() + 600
    )
    st = ledger.state()
    reruns = [e for e in st.evidence if e.kind == EvidenceKind.rerun]
    by_file = {e.data["reverted"]: e for e in reruns}
    # every changed file was tried, the added and the deleted one first (Python, by name)
    assert [e.data["reverted"] for e in reruns] == ["extra.py", "old_helpers.py", "train.py"]
    assert not (Path(by_file["extra.py"].data["variant"]) / "extra.py").exists()
    restored = Path(by_file["old_helpers.py"].data["variant"]) / "old_helpers.py"
    assert restored.read_text() == "Y = 1\n"
    assert by_file["extra.py"].result == EvidenceResult.refuted
    assert by_file["old_helpers.py"].result == EvidenceResult.refuted
    assert by_file["train.py"].result == EvidenceResult.supported
    assert hyp is not None and "train.py" in hyp.statement
    assert st.hypotheses[hyp.id].status.value == "supported"


def test_a_revert_the_case_does_not_allow_is_said_not_skipped(update_case, tmp_path):
    ledger = Ledger(update_case.workspace)
    moved = update_case.model_copy(deep=True)
    moved.run_b.cwd = str(tmp_path / "wt_a")  # a checkout, but of A's revision
    with pytest.raises(InputError, match="not a checkout of run B's revision"):
        validate_revert(moved, ledger, "train.py", [], "unused", timeout_s=60)
    # in the loop the same trouble ends the loop with a warning in the ledger
    assert bisect_changed_files(moved, ledger, "unused", timeout_s=60, deadline=1e12) is None
    assert any("not a checkout" in n["text"] for n in ledger.state().notes)

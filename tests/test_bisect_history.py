"""What a bisection reads from git and builds in worktrees, on real repositories made with
GitPython, and the bad input it refuses before anything is launched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import git
import pytest
from test_bisect_support import (
    AUTHOR,
    ONE_BAD,
    commit,
    launched,
    make_case,
    write_case_toml,
)

from triage_agent.bisect import bisect_case
from triage_agent.bisect.history import open_range, side_commits
from triage_agent.bisect.model import TreeSpec
from triage_agent.bisect.worktree import Patches, TreeNotBuilt, built, place_in, scratch_root
from triage_agent.errors import InputError
from triage_agent.ledger import Ledger

LONG = "".join(f"line {k}\n" for k in range(1, 41))


def _repo(tmp: Path) -> git.Repo:
    repo = git.Repo.init(tmp / "r", initial_branch="main")
    repo.create_tag("v0", ref=commit(repo, {"f.txt": LONG, "old.txt": "x\n"}, "start"))
    return repo


def test_hunks_of_a_commit_revert_one_at_a_time_in_a_worktree(tmp_path):
    repo = _repo(tmp_path)
    two = LONG.replace("line 3\n", "line three\n").replace("line 30\n", "line thirty\n")
    c = commit(repo, {"f.txt": two, "new.txt": "fresh\n", "old.txt": None}, "three files")
    patches = Patches(repo)
    hunks = patches.hunks_of(c.hexsha)
    assert sorted((h.file, h.line) for h in hunks) == [
        ("f.txt", 3),
        ("f.txt", 30),
        ("new.txt", 1),
        ("old.txt", 1),
    ]
    first = next(h for h in hunks if h.line == 3)
    assert first.header.startswith("@@ -1,6 +1,6 @@") and "+line three" in first.diff
    with built(repo, TreeSpec(base=c.hexsha, revert_hunks=[first.id]), "t-one", patches) as wt:
        text = (wt / "f.txt").read_text()
        assert "line 3\n" in text and "line thirty\n" in text  # only that hunk went back
        assert (wt / "new.txt").exists() and not (wt / "old.txt").exists()
    assert not wt.exists()
    whole = TreeSpec(base=c.hexsha, revert_hunks=[h.id for h in hunks])
    with built(repo, whole, "t-all", patches) as wt:
        assert (wt / "f.txt").read_text() == LONG and (wt / "old.txt").read_text() == "x\n"
        assert not (wt / "new.txt").exists()
    with built(repo, TreeSpec(base=c.hexsha, revert_commits=[c.hexsha]), "t-c", patches) as wt:
        assert (wt / "f.txt").read_text() == LONG
    assert len(repo.git.worktree("list").splitlines()) == 1
    assert not repo.is_dirty(untracked_files=True)


def test_a_hunk_is_placed_at_its_line_in_b_after_later_commits_move_it(tmp_path):
    repo = _repo(tmp_path)
    moved = LONG.replace("line 30\n", "line thirty\n")
    c = commit(repo, {"f.txt": moved}, "change line 30")
    later = commit(repo, {"f.txt": "header 1\nheader 2\n" + moved}, "two lines on top")
    patches = Patches(repo)
    (h,) = patches.hunks_of(c.hexsha)
    assert h.line == 30
    assert place_in(repo, later.hexsha, h, patches) == "f.txt:32"
    gone = commit(repo, {"f.txt": LONG.replace("line 30\n", "line XXX\n")}, "rewrite it")
    assert place_in(repo, gone.hexsha, h, patches) == f"f.txt:30@{c.hexsha[:10]}"


def test_a_revert_that_does_not_apply_is_tree_not_built(tmp_path):
    repo = _repo(tmp_path)
    c = commit(repo, {"f.txt": LONG.replace("line 5\n", "line five\n")}, "five")
    b = commit(repo, {"f.txt": LONG.replace("line 5\n", "line 5 again\n")}, "five again")
    patches = Patches(repo)
    (h,) = patches.hunks_of(c.hexsha)
    tree = TreeSpec(base=b.hexsha, revert_hunks=[h.id])
    with (
        pytest.raises(TreeNotBuilt, match="does not revert cleanly"),
        built(repo, tree, "t-bad", patches),
    ):
        pass
    assert len(repo.git.worktree("list").splitlines()) == 1
    assert not (scratch_root() / "t-bad").exists()


def test_the_range_follows_first_parents_then_opens_a_merge(tmp_path):
    repo = _repo(tmp_path)
    commit(repo, {"a.txt": "a\n"}, "main 1")
    repo.git.checkout("-b", "side")
    s1 = commit(repo, {"s.txt": "s1\n"}, "side 1")
    s2 = commit(repo, {"s.txt": "s2\n"}, "side 2")
    repo.git.checkout("main")
    commit(repo, {"b.txt": "b\n"}, "main 2")
    repo.git.merge(
        "--no-ff",
        "-m",
        "merge side",
        "side",
        env={
            "GIT_AUTHOR_NAME": AUTHOR.name,
            "GIT_AUTHOR_EMAIL": AUTHOR.email,
            "GIT_COMMITTER_NAME": AUTHOR.name,
            "GIT_COMMITTER_EMAIL": AUTHOR.email,
        },
    )
    tip = commit(repo, {"c.txt": "c\n"}, "main 3")
    rng = open_range(repo.working_tree_dir, "v0", tip.hexsha)
    assert [c.subject for c in rng.commits] == ["main 1", "main 2", "merge side", "main 3"]
    assert [c.merge for c in rng.commits] == [False, False, True, False]
    assert rng.base == repo.commit("v0").hexsha
    merge = rng.commits[2]
    side = side_commits(repo.working_tree_dir, merge)
    assert [c.sha for c in side] == [s1.hexsha, s2.hexsha]
    assert all(c.side_of == merge.sha for c in side)
    p1 = repo.commit(merge.sha).parents[0].hexsha
    tree = TreeSpec(base=p1, merge=s1.hexsha)
    with built(repo, tree, "t-merge", Patches(repo)) as wt:
        assert (wt / "s.txt").read_text() == "s1\n" and (wt / "b.txt").exists()


def _refused(case, ledger, **kw) -> str:
    with pytest.raises(InputError) as exc:
        bisect_case(case, ledger, **kw)
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_bad_input_is_refused_in_one_line_before_anything_runs(tmp_path):
    case = make_case(tmp_path, ONE_BAD)
    ledger = Ledger(case.workspace)
    assert "does not resolve" in _refused(case, ledger, rev_range="v-a..no-such-tag")
    assert "invalid git revision" in _refused(case, ledger, rev_range="--output=x..v-b")
    assert "invalid revision range" in _refused(case, ledger, rev_range="v-a...v-b")
    assert "not an ancestor" in _refused(case, ledger, rev_range="v-b..v-a")
    assert "same commit" in _refused(case, ledger, rev_range="v-a..v-a")
    outside = git.Repo.init(tmp_path.parent / f"{tmp_path.name}-elsewhere")
    assert "outside the case's roots" in _refused(case, ledger, repo=outside.working_tree_dir)
    bare = case.model_copy(update={"run_a": case.run_a.model_copy(update={"source": None})})
    assert "names no source revisions" in _refused(bare, ledger)
    assert launched(tmp_path) == [] and not ledger.path.exists()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "triage"
    return subprocess.run(
        [str(exe), "bisect", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_cli_bad_revision_is_one_line_and_exit_2(tmp_path):
    case = make_case(tmp_path, ONE_BAD)
    toml = write_case_toml(case, tmp_path / "triage.toml")
    for arg, said in (("--range=-x..v-b", "invalid git revision"), ("--range=v-a..nope", "nope")):
        done = _cli("--case", str(toml), arg, cwd=tmp_path)
        assert done.returncode == 2, done
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and said in lines[0], lines
        assert "Traceback" not in done.stderr
    assert launched(tmp_path) == []


def test_cli_range_whose_b_end_matches_a_says_nothing_to_bisect_and_keeps_the_probe(tmp_path):
    case = make_case(tmp_path, [("docs: readme", {"README.md": "# lib\n"})])
    toml = write_case_toml(case, tmp_path / "triage.toml")
    done = _cli("--case", str(toml), cwd=tmp_path)
    assert done.returncode == 2, done
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and "nothing to bisect" in last, done.stderr
    st = Ledger(case.workspace).state()
    (probe,) = [e for e in st.evidence if getattr(e.data, "bisect", None)]
    assert probe.data.match["all_match"] is True
    assert st.case is not None  # the case is recorded with the probe

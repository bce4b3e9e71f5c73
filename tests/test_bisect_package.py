"""A package the case names (``[runs.x.source] package = "lib"``) taken from throwaway
checkouts of each run's revision, a dirty checkout of B left as it is, and bad input at the
command line refused in one line with the ledger as it was. Real git repositories
(GitPython), real reruns of a tiny plain-torch job."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import git
from test_bisect_support import ONE_BAD, extension_dirs, launched, make_case, write_case_toml

from triage_agent.bisect import bisect_case
from triage_agent.ledger import Ledger
from triage_agent.runs import materialize_case

SCRATCH = str(Path(tempfile.gettempdir()) / f"triage-bisect-{os.getuid()}")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "triage"
    return subprocess.run(
        [str(exe), "bisect", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def test_a_named_package_comes_from_a_throwaway_checkout_of_each_revision(tmp_path):
    case = make_case(tmp_path, ONE_BAD[3:], package=True)
    toml = write_case_toml(case, tmp_path / "triage.toml")
    repo_dir = tmp_path / "lib-repo"
    # the user's work tree is dirty, and importing it would fail: no run may use it
    ops = repo_dir / "lib" / "ops.py"
    ops.write_text(ops.read_text() + "\nraise SystemExit('the work tree was imported')\n")
    (repo_dir / "notes.txt").write_text("mine\n")
    before, status = _snapshot(repo_dir), git.Repo(repo_dir).git.status("--porcelain")
    env_before = os.environ.get("PYTHONPATH")

    done = _cli("--case", str(toml), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads(done.stdout)
    assert res["status"] == "found" and res["mode"] == "pythonpath"
    assert res["first_bad"]["subject"] == "ops: sigmoid form of tanh"
    # run A's baseline imported the library from a checkout of its tag, the probes from
    # their own worktrees: every one in the scratch directory, none from the user's tree
    paths = launched(tmp_path)
    assert paths and all(p.startswith(SCRATCH) for p in paths), paths
    a_sha = git.Repo(repo_dir).commit("v-a").hexsha[:12]
    b_sha = git.Repo(repo_dir).commit("v-b").hexsha[:12]
    assert f"/pkg-{a_sha}-" in paths[0]  # run A's baseline, from a checkout of v-a
    # B's own revision is answered by run B's baseline, a checkout of v-b: the same
    # committed tree, so no probe reruns it; every other probe is in its own worktree
    assert f"/pkg-{b_sha}-" in paths[1]
    assert all("/pkg-" not in p for p in paths[2:])
    assert res["probes"][0]["tree"] == {
        "base": git.Repo(repo_dir).commit("v-b").hexsha,
        "merge": None,
        "revert_commits": [],
        "revert_hunks": [],
    }
    assert len(paths) == 1 + res["reruns"]  # A's baseline, then B's, then the probes
    # the package holds no op sources: every launch shares one build of the installed
    # framework's ops (a checkout with sources builds its own beside it: the test below)
    exts = extension_dirs(tmp_path)
    assert len(exts) == len(paths) and len(set(exts)) == 1, exts
    assert not exts[0].endswith(".torch_extensions"), exts
    # nothing of it is left, and the user's files and environment are as they were
    assert git.Repo(repo_dir).git.worktree("list", "--porcelain").count("worktree ") == 1
    assert _snapshot(repo_dir) == before
    assert git.Repo(repo_dir).git.status("--porcelain") == status
    assert os.environ.get("PYTHONPATH") == env_before
    assert Ledger(case.workspace).state().case.run_b.source.package == "lib"


def test_with_the_baselines_held_b_endpoint_costs_no_rerun(tmp_path):
    """Within ``triage run`` the baselines are already there: the bisection's reruns to the
    first bad commit are then the search's alone, ceil(log2 n) plus skips."""
    case = make_case(tmp_path, ONE_BAD, package=True)
    ledger = Ledger(case.workspace)
    materialize_case(case, Path(case.workspace))
    before = len(launched(tmp_path))
    res = bisect_case(case, ledger, hunks=False)
    assert res.first_bad is not None and res.first_bad.subject == "ops: sigmoid form of tanh"
    assert res.probes[0].tree.base == res.b and not res.probes[0].launched
    to_first_bad = res.probes[: res.probes_to_first_bad]
    reruns = sum(q.launched for q in to_first_bad)
    skips = sum(q.outcome == "skip" for q in to_first_bad)
    assert reruns <= math.ceil(math.log2(len(res.commits))) + skips, res.probes
    assert len(launched(tmp_path)) - before == res.reruns


def test_a_dirty_checkout_of_b_is_left_as_it_is_and_said(tmp_path):
    case = make_case(tmp_path, ONE_BAD[3:])
    run_b = Path(case.run_b.cwd)
    ops = run_b / "lib" / "ops.py"
    ops.write_text(ops.read_text() + "\n# a local note\n")
    (run_b / "scratch.txt").write_text("mine\n")
    before = _snapshot(run_b)
    ledger = Ledger(case.workspace)
    res = bisect_case(case, ledger, hunks=False)
    assert res.status == "found", res.message
    assert res.first_bad.subject == "ops: sigmoid form of tanh"
    assert _snapshot(run_b) == before
    (note,) = [n for n in ledger.state().notes if "uncommitted" in n["text"]]
    assert "lib/ops.py" in note["text"] and "in no probe" in note["text"]


def test_cli_bad_input_is_one_line_exit_2_and_the_ledger_is_kept(tmp_path):
    case = make_case(tmp_path, ONE_BAD[3:])
    toml = write_case_toml(case, tmp_path / "triage.toml")
    ledger = Ledger(case.workspace)
    ledger.note("recorded before")
    kept = ledger.path.read_bytes()
    outside = git.Repo.init(tmp_path.parent / f"{tmp_path.name}-elsewhere")
    for args, said in (
        (["--repo", outside.working_tree_dir], "outside the case's roots"),
        (["--range=--upload-pack=x..v-b"], "invalid git revision"),
        (["--range", "v-a..no-such-tag"], "does not resolve"),
        (["--range", "v-a..v-a"], "nothing to bisect"),
    ):
        done = _cli("--case", str(toml), *args, cwd=tmp_path)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, (args, done.stderr)
        assert len(lines) == 1 and lines[0].startswith("error:") and said in lines[0], lines
        assert ledger.path.read_bytes() == kept, args
    assert launched(tmp_path) == []


def test_a_checkout_builds_its_ops_apart_only_when_it_holds_their_sources(tmp_path):
    from triage_agent.bisect.package import extensions_dir

    job = tmp_path / "job"
    (job / "finetune").mkdir(parents=True)
    (job / "finetune" / "setup.py").write_text("x = 1\n")
    # a job's own Python package loads the installed framework's ops: one shared build
    assert extensions_dir(job) is None
    fw = tmp_path / "fw"
    (fw / "csrc" / "adam").mkdir(parents=True)
    (fw / "csrc" / "adam" / "cpu_adam.cpp").write_text("// op\n")
    # a framework's checkout builds its own revision's ops, beside it
    assert extensions_dir(fw) == str(fw / ".torch_extensions")

"""The embedded demo case and the trainlib case: written out, launched for real, compared.

Both are launched through ``triage_agent.runs`` like any case; the launcher's generic
behaviour (failures, timeouts, refusals, the cache) is tested in ``test_runs.py``.

The DeepSpeed demo is launched exactly once per test session (run A: one launch, run B:
two), through the session fixture ``demo`` in conftest.py; every other demo test reuses
those outputs or launches nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import git
import pytest
from fixtures.trainlib_case import build_trainlib_case

from reproducers.demo.case import write_demo_case
from triage_agent.config import load_case
from triage_agent.errors import InputError
from triage_agent.metrics import diff_metrics, load_metrics
from triage_agent.runs import materialize, materialize_case, run_key


@pytest.mark.slow
def test_demo_metrics_equal_through_36_and_differ_at_37(demo):
    _, (run_a, run_b), _ = demo
    a = load_metrics(run_a.metrics)
    b = load_metrics(run_b.metrics)
    d = diff_metrics(a, b)
    assert d.ranks == [0, 1]
    assert d.common_steps == list(range(41))
    assert d.only_in_a == [] and d.only_in_b == []
    assert d.last_equal_step == 36
    assert d.first_step == 37
    assert {m.rank for m in d.mismatches} == {0, 1}
    assert "loss" in {m.metric for m in d.mismatches}
    assert d.resumes_a == [] and d.resumes_b == [36]
    # every rank logged a float32 loss and grad norm and a float64 learning rate
    for rm in a.ranks.values():
        m = rm.steps[0]
        assert (m["loss"].dtype, m["grad_norm"].dtype, m["lr"].dtype) == (
            "float32",
            "float32",
            "float64",
        )
    # the learning rate follows the step count, so it still agrees after the resume
    for r in (0, 1):
        assert a.ranks[r].steps[37]["lr"].bits == b.ranks[r].steps[37]["lr"].bits


@pytest.mark.slow
def test_demo_materialize_reuses_cached_outputs(demo):
    case, first, _ = demo
    messages: list[str] = []
    again = materialize_case(case, progress=messages.append)
    assert all(r.cached for r in again) and not any(r.cached for r in first)
    assert [r.key for r in again] == [r.key for r in first]
    assert again[1].metrics == first[1].metrics
    assert all("reusing" in m for m in messages) and len(messages) == 2


@pytest.mark.slow
def test_demo_commands_recorded_as_run(demo):
    case, (_, b), messages = demo
    assert b.ok and b.exit_codes == [0, 0] and b.error is None
    assert Path(b.out_dir).parent == Path(case.workspace) / "runs" / "b"
    launcher = str(Path(sys.executable).parent / "deepspeed")
    assert all(argv[0] == launcher for argv in b.argv)
    for argv in b.argv:
        assert "{port}" not in " ".join(argv) and "{out}" not in " ".join(argv)
        port = argv[argv.index("--master_port") + 1]
        assert port.isdigit() and port != "29500"
    assert len(b.logs) == 4 and all(Path(log).is_file() for log in b.logs)
    assert "--resume-from" in b.argv[1]
    assert any("command 2/2" in m for m in messages)


def test_demo_case_loads_and_holds_no_hint(tmp_path):
    toml = write_demo_case(tmp_path / "case")
    text = toml.read_text().lower()
    for word in ("rng", "random", "seed", "dropout", "generator"):
        assert word not in text
    case = load_case(toml)
    assert len(case.run_a.launch) == 1 and len(case.run_b.launch) == 2
    assert case.run_a.launch[0][:3] == ["{bin}/deepspeed", "--num_gpus", "2"]
    assert (tmp_path / "case" / "train.py").is_file()


def test_write_demo_case_is_idempotent_and_keeps_edits(tmp_path):
    dest = tmp_path / "case"
    toml = write_demo_case(dest)
    assert write_demo_case(dest) == toml
    script = dest / "train.py"
    script.write_text(script.read_text() + "\n# edited\n")
    with pytest.raises(InputError, match="different train.py"):
        write_demo_case(dest)
    assert script.read_text().endswith("# edited\n")
    write_demo_case(dest, overwrite=True)
    assert not script.read_text().endswith("# edited\n")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        write_demo_case(tmp_path / "file")


def test_cache_key_follows_script_and_commands(tmp_path):
    case = load_case(write_demo_case(tmp_path / "case"))
    key = run_key(case.run_b, [], None)
    assert run_key(case.run_b, [], None) == key
    script = tmp_path / "case" / "train.py"
    script.write_text(script.read_text() + "\n")
    edited = run_key(case.run_b, [], None)
    assert edited != key
    other = case.run_b.model_copy(update={"launch": case.run_b.launch[:1]})
    assert run_key(other, [], None) not in (key, edited)


@pytest.mark.slow
def test_trainlib_case_differs_from_the_first_step(tmp_path, trainlib):
    toml, case, (run_a, run_b) = trainlib
    repo = git.Repo(case.run_a.source.repo)
    assert {t.name for t in repo.tags} == {"v0.1", "v0.2"}
    changed = repo.git.diff("--name-only", "v0.1", "v0.2").split()
    assert changed == ["trainlib/accumulate.py"]
    assert (case.run_a.source.rev, case.run_b.source.rev) == ("v0.1", "v0.2")
    assert "bfloat16" not in toml.read_text()

    a = load_metrics(run_a.metrics)
    b = load_metrics(run_b.metrics)
    d = diff_metrics(a, b)
    # step 0's loss is computed before any reduced gradient exists, so it must agree;
    # the gradient norm of step 0 already reads the accumulated gradients
    assert d.first_step == 0
    assert {m.metric for m in d.mismatches} == {"grad_norm"}
    assert {m.rank for m in d.mismatches} == {0, 1}
    for r in (0, 1):
        assert a.ranks[r].steps[1]["loss"].bits != b.ranks[r].steps[1]["loss"].bits

    # control: run A launched again elsewhere reproduces its own bits, so the difference
    # above comes from the revision and not from run-to-run noise
    control = materialize(case.run_a, tmp_path / "control-ws", "baseline", timeout_s=case.timeout_s)
    assert control.ok and not control.cached and control.key == run_a.key
    same = diff_metrics(a, load_metrics(control.metrics))
    assert same.first_step is None and same.last_equal_step == 5


def test_trainlib_worktrees_hold_their_revisions(tmp_path):
    case = load_case(build_trainlib_case(tmp_path))
    a = Path(case.run_a.cwd) / "trainlib" / "accumulate.py"
    b = Path(case.run_b.cwd) / "trainlib" / "accumulate.py"
    assert "bfloat16" not in a.read_text() and "bfloat16" in b.read_text()
    repo = git.Repo(case.run_a.source.repo)
    assert git.Repo(case.run_b.cwd).head.commit == repo.commit("v0.2")
    assert git.Repo(case.run_a.cwd).head.commit == repo.commit("v0.1")

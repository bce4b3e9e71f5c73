"""The run launcher: tokens, refusals before launch, failures, timeouts and the cache.

Every command here is a short ``python -c`` program, so the launcher's own behaviour is
tested without DeepSpeed; the demo's real DeepSpeed runs are in ``test_demo_case.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import git
import pytest

from triage_agent import runs
from triage_agent.errors import InputError
from triage_agent.records import Case, RunSpec, SourceSpec
from triage_agent.runs import expand, materialize, materialize_case, run_key

# writes the metrics file under {out}, and counts its launches in a file outside {out}
# (named by directory and name: a file named by an argument is part of the cache key)
WRITE = (
    "import sys; from pathlib import Path; "
    "c = Path(sys.argv[2]) / sys.argv[3]; "
    "c.write_text(c.read_text() + 'x' if c.exists() else 'x'); "
    "Path(sys.argv[1]).write_text('m')"
)


def _run(tmp_path: Path, *launch: list[str], name: str = "x") -> RunSpec:
    return RunSpec(name=name, metrics="{out}/m.txt", launch=list(launch), cwd=str(tmp_path))


def _writer(tmp_path: Path, name: str = "x") -> RunSpec:
    (tmp_path / "count").mkdir(exist_ok=True)
    counter = [str(tmp_path / "count"), f"launches-{name}"]
    return _run(tmp_path, ["{python}", "-c", WRITE, "{out}/m.txt", *counter], name=name)


def _launches(tmp_path: Path, name: str = "x") -> int:
    f = tmp_path / "count" / f"launches-{name}"
    return len(f.read_text()) if f.exists() else 0


def test_expand_keeps_a_named_port_and_fills_tokens(tmp_path):
    argv = expand(["{bin}/deepspeed", "--master_port=1234", "x.py", "--out", "{out}/m"], tmp_path)
    assert argv[1] == "--master_port=1234" and argv[-1] == f"{tmp_path}/m"
    assert argv[0] == str(Path(sys.executable).parent / "deepspeed")
    plain = expand(["{python}", "-c", "pass"], tmp_path)
    assert plain == [sys.executable, "-c", "pass"]
    bare = expand(["{bin}/deepspeed", "x.py"], tmp_path)
    assert bare[1].startswith("--master_port=") and bare[1].split("=")[1].isdigit()
    token = expand(["{bin}/deepspeed", "--master_port", "{port}", "x.py"], tmp_path)
    assert token[2].isdigit() and len(token) == 4


def test_materialize_reuses_a_finished_run(tmp_path):
    run = _writer(tmp_path)
    messages: list[str] = []
    first = materialize(run, tmp_path / "ws", "baseline", timeout_s=60)
    assert first.ok and not first.cached and first.exit_codes == [0]
    assert Path(first.metrics) == Path(first.out_dir) / "m.txt"
    assert Path(first.out_dir).name == f"baseline-{first.key}"
    again = materialize(run, tmp_path / "ws", "baseline", timeout_s=60, progress=messages.append)
    assert again.cached and again.out_dir == first.out_dir and again.key == first.key
    assert _launches(tmp_path) == 1
    assert messages and "reusing" in messages[0]
    fresh = materialize(run, tmp_path / "ws", "baseline", timeout_s=60, reuse=False)
    assert not fresh.cached and _launches(tmp_path) == 2
    # another label is another directory, never the baseline's outputs
    other = materialize(run, tmp_path / "ws", "policy-p", timeout_s=60)
    assert other.out_dir != first.out_dir and _launches(tmp_path) == 3


def test_materialize_relaunches_when_the_cached_metrics_are_gone(tmp_path):
    run = _writer(tmp_path)
    first = materialize(run, tmp_path / "ws", "baseline", timeout_s=60)
    Path(first.metrics).unlink()
    again = materialize(run, tmp_path / "ws", "baseline", timeout_s=60)
    assert again.ok and not again.cached and _launches(tmp_path) == 2


def test_materialize_reports_a_failing_command_and_never_caches_it(tmp_path):
    fail = ["{python}", "-c", "import sys; print('boom: bad flag'); sys.exit(3)", "{out}"]
    after = ["{python}", "-c", "import sys; open(sys.argv[1], 'w')", str(tmp_path / "ran")]
    run = _run(tmp_path, fail, after)
    out = materialize(run, tmp_path / "ws", "baseline", timeout_s=60)
    assert not out.ok and out.exit_codes == [3]
    assert "command 1/2 exited 3: boom: bad flag" in out.error
    assert not (tmp_path / "ran").exists()  # the commands after a failure are not run
    assert not (Path(out.out_dir) / runs.OUTCOME_NAME).exists()
    again = materialize(run, tmp_path / "ws", "baseline", timeout_s=60)
    assert not again.cached and not again.ok


def test_materialize_clears_a_failed_attempt_before_the_next(tmp_path):
    # fails, leaving a file under {out}, until a file outside the run exists
    code = (
        "import sys; from pathlib import Path; o = Path(sys.argv[1]); "
        "ok = (Path(sys.argv[2]) / 'go').exists(); "
        "(o / 'm.txt').write_text('m') if ok else (o / 'stale').write_text('s'); "
        "sys.exit(0 if ok else 1)"
    )
    (tmp_path / "flag").mkdir()
    run = _run(tmp_path, ["{python}", "-c", code, "{out}", str(tmp_path / "flag")])
    failed = materialize(run, tmp_path / "ws", "baseline", timeout_s=60)
    assert not failed.ok and (Path(failed.out_dir) / "stale").exists()
    (tmp_path / "flag" / "go").write_text("")
    good = materialize(run, tmp_path / "ws", "baseline", timeout_s=60)
    assert good.ok and not good.cached and good.out_dir == failed.out_dir
    assert not (Path(good.out_dir) / "stale").exists()


def test_materialize_counts_a_run_without_metrics_as_failed(tmp_path):
    run = _run(tmp_path, ["{python}", "-c", "pass", "{out}"])
    out = materialize(run, tmp_path / "ws", "baseline", timeout_s=60)
    assert out.exit_codes == [0] and not out.ok
    assert "wrote no metrics" in out.error


def test_materialize_ends_a_command_past_its_timeout(tmp_path):
    pidfile = tmp_path / "child.pid"
    code = (
        "import os, subprocess, sys, time; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pidfile)!r}, 'w').write(str(c.pid)); time.sleep(60)"
    )
    run = _run(tmp_path, ["{python}", "-c", code, "{out}"])
    # long enough for the child to start on a loaded machine (the injector loads first)
    out = materialize(run, tmp_path / "ws", "baseline", timeout_s=8)
    assert not out.ok and out.exit_codes == [124]
    assert "ran past 8s; its process group was ended" in out.error
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        # a zombie until its parent (ended too) is reaped by init
        if "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    gone = not Path(f"/proc/{child}").exists()
    assert gone or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_materialize_refuses_missing_program_and_cwd_before_launching(tmp_path):
    ws = tmp_path / "ws"
    with pytest.raises(InputError, match="'no-such-launcher-xyz' of launch command 1 not found"):
        materialize(_run(tmp_path, ["no-such-launcher-xyz", "{out}"]), ws, "baseline")
    with pytest.raises(InputError, match="of launch command 2 not found"):
        materialize(_run(tmp_path, ["{python}", "{out}"], ["./missing.sh", "{out}"]), ws, "b")
    gone = _writer(tmp_path).model_copy(update={"cwd": str(tmp_path / "gone")})
    with pytest.raises(InputError, match="working directory .*gone does not exist"):
        materialize(gone, ws, "baseline")
    with pytest.raises(InputError, match="under '\\{out\\}'"):
        materialize(RunSpec(name="y", metrics="m", launch=[["{python}", "{out}"]]), ws, "b")
    with pytest.raises(InputError, match="no launch commands"):
        materialize(RunSpec(name="y", metrics="{out}"), ws, "b")
    assert not ws.exists()  # nothing was launched, nothing was made


def test_run_key_ignores_where_the_case_lives_but_follows_its_files(tmp_path):
    for d in ("one", "two"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "train.py").write_text("print('hi')\n")
    run = _run(tmp_path / "one", ["{python}", "train.py", "--out", "{out}"])
    moved = run.model_copy(update={"cwd": str(tmp_path / "two")})
    key = run_key(run, [], None)
    assert run_key(moved, [], None) == key
    (tmp_path / "two" / "train.py").write_text("print('bye')\n")
    assert run_key(moved, [], None) != key
    assert run_key(run, ["p"], None) != key
    assert run_key(run.model_copy(update={"env": {"A": "1"}}), [], None) != key


def test_run_key_follows_library_versions(tmp_path, monkeypatch):
    run = _writer(tmp_path)
    key = run_key(run, [], None)
    bumped = {**runs.library_versions(), "deepspeed": "99.0"}
    monkeypatch.setattr(runs, "library_versions", lambda: bumped)
    assert run_key(run, [], None) != key


def test_run_key_follows_the_commit_a_revision_names(tmp_path):
    repo = git.Repo.init(tmp_path / "repo")
    lib = tmp_path / "repo" / "lib.py"
    for text in ("x = 1\n", "x = 2\n"):
        lib.write_text(text)
        repo.index.add(["lib.py"])
        repo.index.commit(f"lib {text.strip()}")
        if text == "x = 1\n":
            repo.create_tag("v1")
    source = SourceSpec(repo=str(tmp_path / "repo"), rev="v1")
    run = _writer(tmp_path).model_copy(update={"source": source})
    key = run_key(run, [], None)
    # the same history in another place is the same run
    shutil.copytree(tmp_path / "repo", tmp_path / "copy")
    elsewhere = run.model_copy(update={"source": SourceSpec(repo=str(tmp_path / "copy"), rev="v1")})
    assert run_key(elsewhere, [], None) == key
    # the tag moved to the later commit: another run
    repo.create_tag("v1", ref="HEAD", force=True)
    assert run_key(run, [], None) != key
    bad = run.model_copy(update={"source": SourceSpec(repo=str(tmp_path / "repo"), rev="nope")})
    with pytest.raises(InputError, match="cannot resolve revision 'nope'"):
        run_key(bad, [], None)
    nowhere = run.model_copy(update={"source": SourceSpec(repo=str(tmp_path / "no"), rev="v1")})
    with pytest.raises(InputError, match="cannot resolve revision 'v1'"):
        run_key(nowhere, [], None)


def test_materialize_case_returns_both_baselines_and_refuses_a_failure(tmp_path):
    case = Case(
        run_a=_writer(tmp_path, "a"),
        run_b=_writer(tmp_path, "b"),
        workspace=str(tmp_path / "ws"),
        timeout_s=60,
    )
    a, b = materialize_case(case)
    assert (a.run, b.run) == ("a", "b") and a.ok and b.ok
    assert Path(a.out_dir).parent == tmp_path / "ws" / "runs" / "a"
    # the same outputs the workflow's baselines use
    assert materialize(case.run_b, tmp_path / "ws", "baseline").cached
    failing = case.model_copy(
        update={"run_b": _run(tmp_path, ["{python}", "-c", "raise SystemExit(5)", "{out}"])}
    )
    with pytest.raises(InputError, match="exited 5"):
        materialize_case(failing)
    a2, b2 = materialize_case(failing, check=False)
    assert a2.cached and not b2.ok


def test_join_trace_segments_keeps_dumps_reachable(tmp_path):
    import json as _json

    from triage_agent.runs import join_trace_segments

    for k in range(2):
        seg = tmp_path / f"seg{k}"
        (seg / "dumps").mkdir(parents=True)
        (seg / "dumps" / f"e{k}.pt").write_bytes(b"x")
        lines = [
            {"type": "header", "schema_version": 1, "run_id": "r", "rank": 0, "created": "t"},
            {
                "type": "event",
                "seq": 0,
                "step": k,
                "kind": "op",
                "name": "aten::add",
                "dump": f"dumps/e{k}.pt",
            },
            {"type": "step_end", "step": k, "events": 1},
            {"type": "end", "status": "ok", "steps": [k]},
        ]
        (seg / "trace_rank00000.jsonl").write_text("\n".join(_json.dumps(x) for x in lines) + "\n")
    (out,) = join_trace_segments([tmp_path / "seg0", tmp_path / "seg1"], tmp_path)
    recs = [_json.loads(x) for x in out.read_text().splitlines()]
    events = [r for r in recs if r["type"] == "event"]
    assert [e["seq"] for e in events] == [0, 1]
    assert all((tmp_path / e["dump"]).is_file() for e in events)
    assert recs[-1] == {
        "type": "end",
        "status": "ok",
        "steps": [0, 1],
        "note": "joined 2 segment(s)",
    }


def test_step_restart_across_commands_is_detected(tmp_path):
    from triage_agent.runs import step_restart

    def seg(k, steps):
        d = tmp_path / f"seg{k}"
        d.mkdir()
        (d / "capture_rank0.json").write_text(json.dumps({"steps_seen": steps}))
        return d

    resumed_right = [seg(0, [0, 1, 2]), seg(1, [3, 4])]
    assert step_restart(resumed_right) is None
    # DeepSpeed: the resumed process begins a step 0 before load_checkpoint restores 37
    loaded_late = [seg(4, list(range(37))), seg(5, [0, 37, 38, 39, 40])]
    assert step_restart(loaded_late) is None
    restarted = [seg(2, [0, 1, 2]), seg(3, [0, 1])]
    msg = step_restart(restarted)
    assert msg and "STEP NUMBERS RESTART" in msg and "command 2 begins at step 0" in msg
    # a preempted job: stopped after step 6, resumed from its checkpoint of step 4, declared
    replayed = [seg(6, list(range(7))), seg(7, [5, 6, 7, 8])]
    (replayed[1] / "capture_rank0.json").write_text(
        json.dumps({"steps_seen": [5, 6, 7, 8], "resumed_from": 4})
    )
    assert step_restart(replayed) is None
    # the same steps without the declaration stay a restart
    assert "STEP NUMBERS RESTART" in (step_restart([seg(8, [0, 1, 2]), seg(9, [1, 2])]) or "")


def test_joined_trace_keeps_the_later_commands_run_of_a_replayed_step(tmp_path):
    import json as _json

    from triage_agent.runs import join_trace_segments

    for k, steps in enumerate(([0, 1, 2], [2, 3])):  # the resumed command runs step 2 again
        seg = tmp_path / f"seg{k}"
        seg.mkdir()
        lines = [{"type": "header", "schema_version": 1, "run_id": "r", "rank": 0, "created": "t"}]
        for st in steps:
            lines.append(
                {"type": "event", "seq": 0, "step": st, "kind": "op", "name": f"aten::add{k}"}
            )
            lines.append({"type": "step_end", "step": st, "events": 1})
        lines.append({"type": "end", "status": "ok", "steps": steps})
        (seg / "trace_rank00000.jsonl").write_text("\n".join(_json.dumps(x) for x in lines) + "\n")
    (out,) = join_trace_segments([tmp_path / "seg0", tmp_path / "seg1"], tmp_path)
    recs = [_json.loads(x) for x in out.read_text().splitlines()]
    events = [(r["step"], r["name"]) for r in recs if r["type"] == "event"]
    assert events == [(0, "aten::add0"), (1, "aten::add0"), (2, "aten::add1"), (3, "aten::add1")]
    assert [r["step"] for r in recs if r["type"] == "step_end"] == [0, 1, 2, 3]


def test_materialize_returns_only_after_a_stray_rank_stopped_writing_under_out(tmp_path):
    # the leader exits 0 at once; the "rank" it started keeps appending to a file in {out}
    rank = "import sys, time\nfor _ in range(3000):\n    open(sys.argv[1], 'a').write('x'); time.sleep(0.02)"
    leader = (
        "import subprocess, sys, time; from pathlib import Path; o = Path(sys.argv[1])\n"
        f"subprocess.Popen([sys.executable, '-c', {rank!r}, str(o / 'rank.log')])\n"
        "(o / 'm.txt').write_text('m')\n"
        "while not (o / 'rank.log').exists(): time.sleep(0.01)"
    )
    out = materialize(_run(tmp_path, ["{python}", "-c", leader, "{out}"]), tmp_path / "ws", "b")
    assert out.ok, out.error
    log = Path(out.out_dir) / "rank.log"
    size = log.stat().st_size
    time.sleep(0.3)
    assert log.stat().st_size == size, "a rank still writes the run's outputs after it returned"
    assert any("outlived its leader" in w for w in out.warnings)


def test_run_key_follows_a_reruns_changes_and_launch_env_removes_a_variable(tmp_path, monkeypatch):
    from triage_agent.policies import FunctionPatch
    from triage_agent.runs import LaunchChanges, launch_env

    run = _writer(tmp_path).model_copy(update={"env": {"KEEP": "1", "DROP": "1"}})
    key = run_key(run, [], None)
    assert run_key(run, [], None, LaunchChanges()) == key  # no change, the same outputs
    unset = LaunchChanges(env={"DROP": None})
    patched = LaunchChanges(patches=[FunctionPatch(target="m:f")])
    assert len({key, run_key(run, [], None, unset), run_key(run, [], None, patched)}) == 3
    monkeypatch.setenv("FROM_CALLER", "x")
    env = launch_env(run, LaunchChanges(env={"DROP": None, "FROM_CALLER": None, "NEW": "2"}))
    assert env["KEEP"] == "1" and env["NEW"] == "2"
    assert "DROP" not in env and "FROM_CALLER" not in env


def test_a_failed_rank_is_named_by_its_own_error_not_by_the_peers_that_followed(tmp_path):
    # what a two-rank gloo job prints when rank 1 raises: rank 0 and the launcher fail after it
    log = tmp_path / "stderr.log"
    log.write_text(
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "train.py", line 40, in <module>\n'
        "[rank1]: RuntimeError: norm of an empty list of tensors\n"
        "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
        "Connection closed by peer [127.0.0.1]:29500\n"
        "subprocess.CalledProcessError: Command '['python', 'train.py']' died with <Signals.SIGTERM: 15>.\n"
    )
    from triage_agent.runs import _last_error_line

    assert _last_error_line(str(log)) == "[rank1]: RuntimeError: norm of an empty list of tensors"


def test_a_single_error_line_is_still_found_when_nothing_reads_like_an_exception(tmp_path):
    log = tmp_path / "stderr.log"
    log.write_text("loading\nerror: config file missing\nbye\n")
    from triage_agent.runs import _last_error_line

    assert _last_error_line(str(log)) == "error: config file missing"


def test_a_run_cached_in_an_older_trace_format_is_launched_again(tmp_path, monkeypatch):
    run = _writer(tmp_path)
    first = materialize(run, tmp_path / "ws", "baseline", timeout_s=60)
    monkeypatch.setattr(runs, "TRACE_SCHEMA_VERSION", runs.TRACE_SCHEMA_VERSION + 1)
    again = materialize(run, tmp_path / "ws", "baseline", timeout_s=60)
    assert not again.cached and again.key != first.key and _launches(tmp_path) == 2

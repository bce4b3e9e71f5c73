"""The launcher: refusals, timeouts that kill the process group, output caps, the explicit
environment, and every way a reproducer can fail becoming result=error (never supported)."""

from __future__ import annotations

import hashlib
import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from reproducers.generator import GeneratedReproducer, generate, record
from reproducers.launcher import EnvPolicy, LaunchOutcome, interpret, launch, parse_output
from triage_agent.errors import InputError, PathEscapeError
from triage_agent.ledger import Ledger

GOOD = {
    "schema": "triage.reproducer/1",
    "template": "cast_roundtrip",
    "status": "ok",
    "supported": True,
    "compared": "a vs b",
}


def _install(ws: Path, source: str, template: str = "cast_roundtrip") -> str:
    """Record an arbitrary program as if generated: the launcher's checks still apply."""
    text = textwrap.dedent(source)
    digest = hashlib.sha256(text.encode()).hexdigest()
    rid = f"R-{digest[:16]}"
    d = ws / "reproducers"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{rid}.py").write_text(text)
    (d / f"{rid}.params.json").write_text("{}")
    record(
        Ledger(ws),
        GeneratedReproducer(
            id=rid,
            template=template,
            params={},
            path=str(d / f"{rid}.py"),
            params_path=str(d / f"{rid}.params.json"),
            sha256=digest,
        ),
    )
    return rid


def _printing(obj) -> str:
    return f"import json\nprint(json.dumps({obj!r}))\n"


def test_launch_real_template_records_evidence(tmp_path):
    ledger = Ledger(tmp_path)
    gen = generate({"template": "cast_roundtrip", "params": {"n": 256}}, tmp_path, ledger=ledger)
    ev = launch(gen.id, tmp_path, hypotheses=["H-1"])
    assert ev.result.value == "supported"
    assert ev.kind.value == "reproducer"
    assert ev.hypotheses == ["H-1"]
    assert isinstance(ev.argv, list) and ev.argv[-1].endswith(f"{gen.id}.py")
    assert ev.provenance is not None and ev.provenance.torch
    out = ev.data.output
    assert (
        out["digests"]["accumulate_fp32"] != out["digests"]["accumulate_after_roundtrip"]
    ) is True
    roles = {a.role for a in ev.artifacts}
    assert roles == {"reproducer", "params", "stdout", "stderr"}
    assert [e.id for e in ledger.state().evidence] == [ev.id]


def test_launch_refuses_unrecorded_id(tmp_path):
    with pytest.raises(InputError, match="not recorded"):
        launch("R-0000000000000000", tmp_path)


def test_launch_refuses_modified_file(tmp_path):
    gen = generate({"template": "cast_roundtrip"}, tmp_path, ledger=Ledger(tmp_path))
    p = tmp_path / "reproducers" / f"{gen.id}.py"
    p.write_text(p.read_text() + "\nimport os\n")
    with pytest.raises(InputError, match="modified after generation"):
        launch(gen.id, tmp_path)
    assert Ledger(tmp_path).state().evidence == []


def test_launch_refuses_symlink_escape(tmp_path):
    gen = generate({"template": "cast_roundtrip"}, tmp_path, ledger=Ledger(tmp_path))
    p = tmp_path / "reproducers" / f"{gen.id}.py"
    outside = tmp_path.parent / f"outside-{gen.id}.py"
    outside.write_text(p.read_text())
    p.unlink()
    p.symlink_to(outside)
    with pytest.raises(PathEscapeError):
        launch(gen.id, tmp_path)


def test_launch_rejects_bad_arguments(tmp_path):
    gen = generate({"template": "cast_roundtrip"}, tmp_path, ledger=Ledger(tmp_path))
    with pytest.raises(InputError, match="one process"):
        launch(gen.id, tmp_path, ranks=2, launcher="python")
    with pytest.raises(InputError, match="timeout"):
        launch(gen.id, tmp_path, timeout_s=-1)
    with pytest.raises(InputError, match="unknown launcher"):
        launch(gen.id, tmp_path, launcher="bash")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("raise SystemExit('boom')\n", "no result line"),
        ("print('hello, world')\n", "no result line"),
        ("pass\n", "no result line"),
        (
            'import sys\nsys.stdout.write(\'{"schema": "triage.reproducer/1", broken\\n\')\n',
            "not JSON",
        ),
        (_printing({**GOOD, "supported": "yes"}), "does not validate"),
        (_printing({**GOOD, "template": "rng_resume"}), "expected 'cast_roundtrip'"),
        (_printing(GOOD) + _printing({**GOOD, "supported": False}), "2 different result lines"),
        (_printing(GOOD) + "raise SystemExit(3)\n", "exit code 3 after printing"),
        (
            _printing({**GOOD, "status": "error", "details": {"exception": "KeyError: x"}}),
            "KeyError: x",
        ),
    ],
)
def test_launch_failures_are_error_evidence(tmp_path, source, reason):
    rid = _install(tmp_path, source)
    ev = launch(rid, tmp_path, timeout_s=60)
    assert ev.result.value == "error"
    assert reason in ev.summary
    assert Ledger(tmp_path).state().evidence[-1].id == ev.id


def test_launch_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    rid = _install(
        tmp_path,
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        time.sleep(600)
        """,
    )
    t0 = time.monotonic()
    ev = launch(rid, tmp_path, timeout_s=3)
    assert time.monotonic() - t0 < 60
    assert ev.result.value == "error" and "timed out" in ev.summary
    assert ev.data.timed_out is True
    child = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child), "a process of the reproducer's group survived the timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_launch_output_is_capped(tmp_path):
    rid = _install(tmp_path, "import sys\nsys.stdout.write('x' * 5_000_000)\n" + _printing(GOOD))
    ev = launch(rid, tmp_path, output_cap=100_000)
    stdout = next(a for a in ev.artifacts if a.role == "stdout")
    assert stdout.bytes == 100_000
    assert ev.result.value == "error" and "truncated" in ev.summary


def test_launch_environment_is_explicit(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_TEST_SECRET", "s3cret")
    src = (
        "import json, os\n"
        "d = dict(schema='triage.reproducer/1', template='cast_roundtrip', status='ok', supported=None,\n"
        "         compared='env', details={'env': dict(os.environ)})\n"
        "print(json.dumps(d))\n"
    )
    rid = _install(tmp_path, src)
    ev = launch(rid, tmp_path, env_policy=EnvPolicy(deterministic=True, set={"MY_KNOB": "1"}))
    env = ev.data.output["details"]["env"]
    assert "TRIAGE_TEST_SECRET" not in env
    assert env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8" and env["MY_KNOB"] == "1"
    assert ev.provenance.env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert ev.result.value == "inconclusive"
    ev2 = launch(rid, tmp_path)
    assert "CUBLAS_WORKSPACE_CONFIG" not in ev2.data.output["details"]["env"]


def test_parse_output_accepts_a_prefixed_line():
    line = "[rank0]: " + json.dumps(GOOD)
    assert parse_output("noise\n" + line + "\n", "cast_roundtrip").supported is True


def test_interpret_skipped_is_inconclusive(tmp_path):
    out, err = tmp_path / "o", tmp_path / "e"
    out.write_text(
        json.dumps({**GOOD, "status": "skipped", "supported": None, "notes": ["needs CUDA"]}) + "\n"
    )
    err.write_text("")
    outcome = LaunchOutcome(
        argv=["x"],
        returncode=0,
        timed_out=False,
        duration_s=0.1,
        stdout_path=str(out),
        stderr_path=str(err),
        stdout_truncated=False,
        stderr_truncated=False,
    )
    result, summary, data = interpret(outcome, "cast_roundtrip")
    assert result.value == "inconclusive" and "needs CUDA" in summary and data["skipped"]


def test_launch_under_torchrun_two_ranks(tmp_path):
    gen = generate(
        {"template": "reduction_order", "params": {"world_size": 2}},
        tmp_path,
        ledger=Ledger(tmp_path),
    )
    ev = launch(gen.id, tmp_path, ranks=2, launcher="torchrun", timeout_s=240)
    assert "torch.distributed.run" in ev.argv and "--nproc_per_node=2" in ev.argv
    assert ev.result.value in ("supported", "refuted"), ev.summary
    assert len(ev.data.output["digests"]["all_reduce_per_rank"]) == 2


def test_cli_launch_says_the_command_as_a_shell_line_not_a_list(tmp_path):
    import shlex
    import subprocess
    import sys

    rid = _install(tmp_path, _printing(GOOD))
    out = subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "reproduce", "launch", rid,
         "-w", str(tmp_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    ev = Ledger(tmp_path).state().evidence[-1]
    assert f"to reproduce: {shlex.join(ev.argv)}" in out.stdout.splitlines(), out.stdout
    assert "['" not in out.stdout


def test_cli_launch_and_replay_refuse_an_unknown_hypothesis(tmp_path):
    import subprocess
    import sys

    rid = _install(tmp_path, _printing(GOOD))
    for cmd in (["launch", rid], ["replay", str(tmp_path / "none.pt")]):
        out = subprocess.run(
            [sys.executable, "-m", "triage_agent.cli.app", "reproduce", *cmd,
             "-H", "H-nothere", "-w", str(tmp_path)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert out.returncode == 2 and "unknown hypothesis id(s) H-nothere" in out.stderr
    assert not Ledger(tmp_path).state().evidence

"""Ctrl-C in the middle of a probe: `triage bisect` exits 130 in one line, the probe it
interrupted is not recorded (neither as a skip nor otherwise), and the next call reads every
finished probe back from the ledger and launches only what was not finished. Real git
(GitPython), a real `triage bisect` process, real reruns of a tiny plain-torch job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import git
from test_bisect_support import ONE_BAD, make_case, probe_launches, write_case_toml
from test_cli_support import ctrl_c_reaches

from triage_agent.ledger import Ledger

SCRATCH = Path(tempfile.gettempdir()) / f"triage-bisect-{os.getuid()}"


def _argv(toml: Path) -> list[str]:
    return [str(Path(sys.executable).parent / "triage"), "bisect", "--case", str(toml), "--json"]


def _key(launch: str) -> str:
    """The probe a launch belongs to: its worktree is named by the probe's key."""
    return Path(launch).relative_to(SCRATCH).parts[0]


def _recorded(case) -> set[str]:
    return {
        e.data.bisect.probe
        for e in Ledger(case.workspace).state().evidence
        if getattr(e.data, "bisect", None)
    }


def test_ctrl_c_during_a_probe_resumes_without_rerunning_a_finished_one(tmp_path):
    case = make_case(tmp_path, ONE_BAD)
    # each probe of B waits after it is launched, so Ctrl-C lands inside one
    case.run_b.env["BISECT_PAUSE"] = "3"
    toml = write_case_toml(case, tmp_path / "triage.toml")
    proc = subprocess.Popen(
        _argv(toml),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_reaches,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            done = _recorded(case) if Ledger(case.workspace).path.exists() else set()
            # two probes finished and a third one launched, not yet finished
            if len(done) >= 2 and len(probe_launches(tmp_path)) > len(done):
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the bisection ended before it could be interrupted"
        in_flight = _key(probe_launches(tmp_path)[-1])
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "interrupted" in err and "resume" in err
    assert out == ""
    before = _recorded(case)
    assert in_flight not in before, "the interrupted probe was recorded as if it had ended"
    kept = Ledger(case.workspace).path.read_bytes()
    first_launches = probe_launches(tmp_path)
    # its worktree is gone; only the user's checkouts remain
    assert not (SCRATCH / in_flight).exists()
    assert len(git.Repo(tmp_path / "lib-repo").git.worktree("list").splitlines()) == 3

    done = subprocess.run(_argv(toml), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads(done.stdout)
    assert res["status"] == "found" and res["first_bad"]["subject"] == "ops: sigmoid form of tanh"
    again = [_key(p) for p in probe_launches(tmp_path)[len(first_launches) :]]
    assert not set(again) & before, "a probe finished before Ctrl-C was launched again"
    assert in_flight in again  # the unfinished one is probed now, for real
    assert res["reused"] == len(before) and res["reruns"] == len(again)
    assert Ledger(case.workspace).path.read_bytes().startswith(kept)  # appended to only

"""The sentinel: every step's collective buffers and optimizer writes in a ring, read with no
relaunch for the first divergent step and rank of two runs, and for a rank that disagrees
with its peers inside one run (a planted bit flip)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from triage_agent.compare.sentinel import device_suspects, locate
from triage_agent.evidence_data import TraceCompareData
from triage_agent.ledger import Ledger
from triage_agent.records import Case, RunSpec
from triage_agent.workflow.recorded import sentinel_reading

pytestmark = pytest.mark.xdist_group("sentinel")

JOB = Path(__file__).parent / "fixtures" / "sentinel_job.py"


def _torchrun(ranks: int, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={ranks}",
        str(JOB),
        *args,
    ]


def _losses(stdout: str) -> list[str]:
    return re.findall(r"^step \d+ loss [0-9a-f]{8}$", stdout, flags=re.M)


# gloo can abort a rank's teardown after every step is done (std::terminate in its
# destructor); that exit, after all six steps were written, is the one thing tolerated
TEARDOWN_ABORT = "terminate called without an active exception"


def _finished(rc: int, stdout: str, stderr: str) -> bool:
    return rc == 0 or (len(_losses(stdout)) == 6 and TEARDOWN_ABORT in stderr)


def _record(out: Path, argv: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        ["triage", "record", "--sentinel", "--out", str(out), "--", *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    logs = [(out / f"command.{k}.log") for k in ("stdout", "stderr")]
    stdout, stderr = (p.read_text() if p.is_file() else "" for p in logs)
    assert _finished(proc.returncode, stdout, stderr + proc.stderr), proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sentinel")
    rec = {
        "a": root / "a",
        "b": root / "b",
        "flip": root / "flip",
    }
    _record(rec["a"], _torchrun(2))
    _record(rec["b"], _torchrun(2, "--nudge-rank", "1", "--nudge-step", "3"))
    _record(rec["flip"], _torchrun(3, "--flip-rank", "2", "--flip-step", "3"))
    return rec


def test_the_sentinel_leaves_the_metric_bits_alone(recordings, tmp_path):
    plain = subprocess.run(_torchrun(2), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert _finished(plain.returncode, plain.stdout, plain.stderr), plain.stderr
    recorded = (recordings["a"] / "command.stdout.log").read_text()
    assert _losses(plain.stdout) and _losses(recorded) == _losses(plain.stdout)


def test_two_recordings_locate_the_first_step_and_the_rank_that_makes_it(recordings):
    found = locate(recordings["a"], recordings["b"])
    # the loss of step 3 is logged after the nudged update, so the metrics part later: the
    # sentinel names the step whose all-reduce first carried the difference
    assert found.step == 3
    assert found.ranks == [0, 1]
    assert found.starts == [1]
    firsts = {f.rank: f for f in found.firsts}
    assert "input" in firsts[1].record and firsts[1].starts
    assert "output" in firsts[0].record and not firsts[0].starts
    line = JOB.read_text().splitlines().index("    dist.all_reduce(bucket)") + 1
    assert firsts[1].caller and firsts[1].caller.endswith(f"sentinel_job.py:{line}")
    same = locate(recordings["a"], recordings["a"])
    assert same.step is None and same.steps_compared == 7


def test_a_planted_bit_flip_is_attributed_to_its_rank(recordings):
    check = device_suspects(recordings["flip"])
    assert [(d.rank, d.step, d.peers) for d in check.suspects] == [(2, 3, [0, 1])]
    assert "between the reduction and the update" in check.suspects[0].reason
    assert not check.ties
    clean = device_suspects(recordings["a"])
    assert not clean.suspects and not clean.ties and clean.steps_read == 7


def test_a_collective_output_that_differs_on_one_rank_is_a_suspect(recordings, tmp_path):
    # the recording of a clean three-rank step with one rank's all-reduced digest changed,
    # as a device that reduced wrongly would have recorded it
    rec = tmp_path / "rec"
    shutil.copytree(recordings["flip"], rec)
    trace = next((rec / "rank00001").glob("seg*")) / "trace_rank00001.jsonl"
    lines = trace.read_text().splitlines()
    for i, line in enumerate(lines):
        ev = json.loads(line)
        if ev.get("type") == "event" and ev["step"] == 1 and ev["name"] == "all_reduce":
            out = ev["outputs"][0]
            out["digest"] = format(int(out["digest"], 16) ^ 1, "x").rjust(len(out["digest"]), "0")
            lines[i] = json.dumps(ev, separators=(",", ":"))
            break
    else:
        pytest.fail("no all_reduce at step 1 on rank 1")
    trace.write_text("\n".join(lines) + "\n")
    check = device_suspects(rec)
    first = check.suspects[0]
    assert (first.rank, first.step, first.peers) == (1, 1, [0, 2])
    assert first.record.startswith("all_reduce") and "all_reduce output" in first.reason


def test_triage_record_check_and_locate_exit_codes(recordings):
    check = subprocess.run(
        ["triage", "record-check", str(recordings["flip"])], capture_output=True, text=True
    )
    assert check.returncode == 1 and "device suspects" in check.stdout
    clean = subprocess.run(
        ["triage", "record-check", str(recordings["a"])], capture_output=True, text=True
    )
    assert clean.returncode == 0 and "no rank disagrees" in clean.stdout
    loc = subprocess.run(
        ["triage", "record-locate", str(recordings["a"]), str(recordings["b"]), "--json"],
        capture_output=True,
        text=True,
    )
    assert loc.returncode == 1 and json.loads(loc.stdout)["step"] == 3
    bad = subprocess.run(
        ["triage", "record-locate", str(recordings["a"]), "/nonexistent/rec"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "holds no recording" in bad.stderr


def test_the_workflow_records_the_sentinel_reading_once(recordings, tmp_path):
    case = Case(
        name="sentinel-pair",
        run_a=RunSpec(name="a", trace_dir=str(recordings["a"])),
        run_b=RunSpec(name="b", trace_dir=str(recordings["flip"])),
    )
    ledger = Ledger(tmp_path / "ws")
    ledger.record_case(case)
    found = sentinel_reading(case, ledger)
    assert found is not None and found.step is not None
    st = ledger.state()
    held = [e for e in st.evidence if isinstance(e.data, TraceCompareData)]
    assert len(held) == 1 and held[0].data.level == "sentinel"
    assert any("device suspect in run b: rank 2 at step 3" in n["text"] for n in st.notes)
    assert sentinel_reading(case, ledger) is None  # read once, not again on a resume
    assert len([e for e in ledger.state().evidence if isinstance(e.data, TraceCompareData)]) == 1


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.xdist_group("sentinel-deepspeed")
def test_a_deepspeed_resume_is_located_at_its_first_resumed_step(tmp_path):
    """A real DeepSpeed ZeRO-2 job on a CPU rank, uninterrupted (A) against a checkpoint after
    step 3 and a resume that leaves the RNG behind (B, two processes recorded into one ring
    the way a launcher sets the recorder up)."""
    from triage_agent.fingerprint.recorder import RecorderSettings, prepare

    case = tmp_path / "case"
    shutil.copytree(Path(__file__).parent / "cases" / "ds-resume-rng", case)
    ds = str(Path(sys.executable).parent / "deepspeed")

    def launch(rec: Path, *argvs: list[str]) -> None:
        extra = prepare(RecorderSettings(out_dir=rec, level="sentinel"))
        env = dict(os.environ)
        env["PYTHONPATH"] = extra.pop("PYTHONPATH") + os.pathsep + env.get("PYTHONPATH", "")
        env.update(extra)
        for argv in argvs:
            cmd = [ds, "--num_gpus", "1", "--master_port", str(_free_port()), "train.py"]
            cmd += ["--deepspeed_config", "ds.json", *argv]
            proc = subprocess.run(
                cmd, cwd=case, env=env, capture_output=True, text=True, timeout=600
            )
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]

    a, b = tmp_path / "rec_a", tmp_path / "rec_b"
    launch(a, ["--out", str(tmp_path / "out_a"), "--steps-to", "7"])
    ck = str(tmp_path / "ckpt")
    launch(
        b,
        ["--out", str(tmp_path / "out_b"), "--steps-to", "3", "--save", ck],
        ["--out", str(tmp_path / "out_b"), "--steps-to", "7", "--resume", ck],
    )
    found = locate(a, b)
    assert found.step == 4, found
    assert found.ranks == [0] and found.starts == [0]
    assert found.steps_compared == 5  # steps 0-3 agree before the resumed one
    assert not device_suspects(b).suspects

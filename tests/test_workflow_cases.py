"""The headless workflow end to end on real cases: the embedded DeepSpeed demo (with a Ctrl-C
in the middle and a resume) and the two-commit training-library case."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures.trainlib_case import build_trainlib_case
from test_cli_support import ctrl_c_reaches

from triage_agent.config import load_case
from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind, EvidenceResult
from triage_agent.workflow.engine import run_workflow
from triage_agent.workflow.options import RunOptions

TRIAGE = [sys.executable, "-m", "triage_agent.cli.app"]


def _stage_done(ledger_path: Path, stage: str) -> bool:
    if not ledger_path.exists():
        return False
    for line in ledger_path.read_text().splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (
            ev.get("kind") == "stage"
            and ev["data"].get("stage") == stage
            and ev["data"].get("status") == "done"
        ):
            return True
    return False


def _took_the_baselines(ws: Path, baselines) -> None:
    """The workflow used the runs already in the workspace instead of launching them again."""
    for run in baselines:
        kept = [p.name for p in (ws / "runs" / run.run).glob("baseline-*")]
        assert kept == [Path(run.out_dir).name], kept


@pytest.mark.slow
def test_demo_run_interrupted_then_resumed_reaches_a_validated_verdict(tmp_path, demo):
    # the embedded case in the workspace the demo fixture launched its baselines into: what
    # is tested here is the interrupt and the resume, not three more launches of the same runs
    case, baselines, _ = demo
    ws = Path(case.workspace)
    cmd = [*TRIAGE, "run", "--mismatch-step", "37", "-w", str(ws)]
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_reaches,
    )
    deadline = time.monotonic() + 900
    while not _stage_done(ws / "ledger.jsonl", "scan"):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the scan never finished"
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    mid = Ledger(ws).state()  # consistent: loads, and the finished scan is kept
    scans = [e for e in mid.evidence if e.kind == EvidenceKind.static]
    assert len(scans) == 1 and mid.hypotheses

    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    st = Ledger(ws).state()
    assert len([e for e in st.evidence if e.kind == EvidenceKind.static]) == 1, (
        "the scan was redone"
    )
    v = st.verdict
    assert v is not None and v.classification.value != "unknown"
    chain = {e.id: e for e in st.evidence if e.id in v.evidence}
    kinds = {(e.kind, e.result) for e in chain.values()}
    # The state at the step boundaries names the RNG streams the resume did not restore, and
    # the rerun with them restored proves it: the verdict rests on that rerun, not on a trace.
    assert (EvidenceKind.rerun, EvidenceResult.supported) in kinds
    assert "rng" in f"{v.location} {v.statement}".lower()
    traces = [e for e in chain.values() if e.kind == EvidenceKind.trace_compare]
    assert not traces or traces[-1].data.origin["b"]["step"] == 37
    rerun = next(e for e in chain.values() if e.kind == EvidenceKind.rerun)
    assert rerun.data.first_step is None and rerun.data.common_steps == 41
    assert st.hypotheses[v.hypothesis].status.value == "supported"
    assert (ws / "report.html").exists() and (ws / "report.md").exists()
    _took_the_baselines(ws, baselines)

    n = len(st.evidence)
    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0
    assert len(Ledger(ws).state().evidence) == n, "a finished workflow redid work"


@pytest.mark.slow
def test_trainlib_case_scan_is_bounded_by_the_diff_and_the_revert_validates(trainlib):
    _, case, baselines = trainlib  # the runs already launched: the workflow takes them
    ledger = Ledger(case.workspace)
    result = run_workflow(case, ledger, RunOptions(timeout_s=300, max_hypotheses=3))
    st = ledger.state()
    assert result.mismatch.step == 0 and "update" in result.mismatch.phases
    scan = next(e for e in st.evidence if e.kind == EvidenceKind.static)
    assert scan.data.request["diff"] == "v0.1..v0.2"
    import git

    repo = git.Repo(case.run_b.source.repo)
    changed = {d.b_path for d in repo.commit("v0.1").diff("v0.2")}
    assert st.findings and {f.file for f in st.findings.values()} <= changed
    v = result.verdict
    assert v is not None and v.hypothesis is not None
    reruns = [e for e in st.evidence if e.kind == EvidenceKind.rerun]
    assert reruns and reruns[-1].result == EvidenceResult.supported
    assert reruns[-1].data.reverted in changed
    assert reruns[-1].id in v.evidence
    _took_the_baselines(Path(case.workspace), baselines)


@pytest.mark.slow
def test_source_upgrade_no_probe_explains_is_proven_by_bisecting_to_the_hunk(tmp_path):
    """Two files change, one matters, no finding points at it: the revisions are bisected
    to the commit, then to the hunk, whose revert alone makes B match A."""
    case = load_case(build_trainlib_case(tmp_path, change="clip-order"))
    ledger = Ledger(case.workspace)
    result = run_workflow(case, ledger, RunOptions(timeout_s=300, max_hypotheses=3))
    st = ledger.state()
    v = result.verdict
    assert v is not None and v.hypothesis is not None, v
    assert "trainlib/optim.py" in (v.location or "") and "data.py" not in (v.location or "")
    proof = [
        e
        for e in st.evidence_for(v.hypothesis)
        if e.kind == EvidenceKind.rerun and e.result == EvidenceResult.supported
    ]
    assert proof and proof[-1].data.bisect is not None and proof[-1].id in v.evidence
    assert v.location.startswith("trainlib/optim.py:")
    # the harmless file is in no supported hypothesis
    supported = [h for h in st.hypotheses.values() if h.status.value == "supported"]
    assert supported and not any("data.py" in h.statement for h in supported)

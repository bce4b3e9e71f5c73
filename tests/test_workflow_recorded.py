"""`triage run` takes the module-level window from flight recordings when they hold it and did
not perturb their runs, with no traced relaunch; otherwise it says why and relaunches."""

from __future__ import annotations

import sys
from pathlib import Path

from test_workflow_speed import NUDGED, _run

from triage_agent.fingerprint.recorder import RecorderSettings, record_command
from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind


def _case(d: Path, b_recorded_as: str) -> tuple[Path, Path]:
    """Runs A and B (B nudges its first layer from step 2), each recorded by the flight
    recorder first; B's recording is made of the command ``b_recorded_as`` says."""
    d.mkdir()
    (d / "train.py").write_text(NUDGED)
    for run, flag in (("a", []), ("b", [b_recorded_as] if b_recorded_as else [])):
        argv = [sys.executable, str(d / "train.py"), str(d / f"prod_{run}"), *flag]
        rec = record_command(argv, RecorderSettings(out_dir=d / f"rec_{run}", run_id=run))
        assert rec.capture.exit_code == 0 and rec.ranks and rec.ranks[0].steps == [0, 1, 2, 3]
    runs = "".join(
        f'\n[runs.{r}]\nmetrics = "{{out}}"\ntrace_dir = "rec_{r}"\n'
        f'launch = [["{{python}}", "train.py", "{{out}}"{arg}]]\n'
        for r, arg in (("a", ""), ("b", ', "--b"'))
    )
    toml = d / "triage.toml"
    toml.write_text(
        '[case]\nname = "recorded"\nworkspace = "ws"\nsource_roots = ["."]\n'
        'scan_paths = ["train.py"]\ntimeout_s = 120.0\n' + runs
    )
    return toml, d / "ws"


def _module_trace(ws: Path) -> tuple[dict, list[str], list[str]]:
    """The module-level trace comparison's data, the ledger's notes, B's run directories."""
    st = Ledger(ws).state()
    ev = next(
        e
        for e in st.evidence
        if e.kind == EvidenceKind.trace_compare and e.summary.startswith("module trace")
    )
    notes = [n["text"] for n in st.notes]
    return (
        ev.model_dump(mode="json")["data"],
        notes,
        sorted(p.name for p in (ws / "runs" / "b").iterdir()),
    )


def test_run_compares_the_recorded_window_without_a_traced_relaunch(tmp_path):
    toml, ws = _case(tmp_path / "c", "--b")
    r = _run(toml)
    assert r.returncode == 0, r.stderr[-2000:]
    data, notes, dirs = _module_trace(ws)
    assert any(
        "taken from the recordings" in n and "equal its untraced baseline" in n for n in notes
    )
    assert not any(d.startswith("module-trace") for d in dirs), dirs  # no module relaunch
    assert data["trace_dirs"]["b"] == str((ws / "runs" / "b" / "recorded-1-2").resolve())
    assert data["origin_location"].startswith("rank 0 step 2 module 0::Nudge"), data


def test_a_recording_whose_bits_differ_from_the_baseline_is_not_used(tmp_path):
    # B's recording is of A's command: its bits are not B's untraced bits
    toml, ws = _case(tmp_path / "c", "")
    r = _run(toml)
    assert r.returncode == 0, r.stderr[-2000:]
    data, notes, dirs = _module_trace(ws)
    said = [n for n in notes if "the recordings are not used" in n]
    assert said and "changed run b's own metric bits from step 2" in said[0], notes
    assert any(d.startswith("module-trace") for d in dirs), dirs  # relaunched with the tracer
    assert "recorded" not in data["trace_dirs"]["b"]
    assert data["origin_location"].startswith("rank 0 step 2 module 0::Nudge"), data

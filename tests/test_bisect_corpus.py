"""The corpus's library upgrade (twelve commits, two of which change the bits, neither
revert alone restoring A) bisected end to end through ``triage bisect``, as a user runs it.

Checked against the case's ground truth: the first bad commit's hunk is at the expected
location, and the minimal set holds exactly the two commits the case's notes name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cases.corpus import discover, select, stage

from triage_agent.config import load_case
from triage_agent.ledger import Ledger

CASE = "lib-upgrade-many-commits"


def _triage(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "triage"
    return subprocess.run(
        [str(exe), "bisect", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


# 11 reruns of a plain-torch job: 51 s at load 5, 62 s at load 10 on the 2-core machine,
# at the 60 s bound, so marked slow
@pytest.mark.slow
def test_corpus_library_upgrade_bisected_to_its_two_hunks(tmp_path):
    (case,) = select(discover(), [CASE])
    toml = stage(case, tmp_path)
    done = _triage("--case", str(toml), "--json", cwd=toml.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads(done.stdout)
    assert res["status"] == "found"
    assert res["first_bad"]["subject"].startswith("model: tanh-approximate GELU")
    assert res["revert_first_bad"]["outcome"] == "bad"  # optim still differs
    assert [c["subject"].split(":")[0] for c in res["culprits"]] == ["model", "optim"]
    assert len(res["commits"]) == 12
    assert res["probes_to_first_bad"] <= 1 + 4  # B's revision, then ceil(log2(12))
    want_file, want_line = case.expected.location.rsplit(":", 1)
    first = res["hunks"][0]["hunk"]
    got_file, got_line = first["location"].rsplit(":", 1)
    assert got_file == want_file
    assert abs(int(got_line) - int(want_line)) <= case.expected.location_tolerance
    assert [h["hunk"]["file"] for h in res["hunks"]] == ["minitrain/model.py", "minitrain/optim.py"]
    assert all(h["alone"]["outcome"] == "bad" for h in res["hunks"])
    assert res["proof"]["outcome"] == "good"
    st = Ledger(load_case(toml).workspace).state()
    assert st.hypotheses[res["hypothesis"]].status.value == "supported"

    # the same command again reads every probe back and renders the tables
    shown = _triage("--case", str(toml), cwd=toml.parent)
    assert shown.returncode == 0, shown.stderr[-2000:]
    text = shown.stdout
    assert "first bad" in text and "minitrain/model.py:16" in text
    assert 'approximate="tanh"' in text and "for the reader" in text
    assert "0 launched" in text

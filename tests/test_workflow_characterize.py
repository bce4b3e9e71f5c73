"""Characterisation from metric fingerprints written by the real MetricLog."""

import pytest

from triage_agent.errors import InputError
from triage_agent.ledger import Ledger
from triage_agent.metrics import MetricLog
from triage_agent.records import Case, RunSpec, SourceSpec
from triage_agent.workflow import characterize, confirm_mismatch
from triage_agent.workflow.stage1 import scan_request


def _write(dir_, steps, *, diverge_at=None, resumed_from=None, ranks=(0, 1)):
    for r in ranks:
        log = MetricLog(dir_, rank=r)
        for s in steps:
            if resumed_from is not None and s == resumed_from + 1:
                log.close()
                log = MetricLog(dir_, rank=r, resumed_from=resumed_from)
            loss = 1.0 / (s + 1)
            if diverge_at is not None and s >= diverge_at and r == 1:
                loss = float.fromhex(loss.hex()) + 2**-40
            log.log(s, loss=loss, lr=1e-3)
        log.close()


def _case(tmp_path, **kw):
    return Case(
        run_a=RunSpec(name="a", metrics=str(tmp_path / "a")),
        run_b=RunSpec(name="b", metrics=str(tmp_path / "b")),
        **kw,
    )


def test_characterize_finds_first_step_and_resume(tmp_path):
    _write(tmp_path / "a", range(41))
    _write(tmp_path / "b", range(41), diverge_at=37, resumed_from=36)
    rep = characterize(_case(tmp_path))
    assert rep.step == 37 and rep.diff.last_equal_step == 36
    assert rep.phases[0] == "resume"
    assert "multi-rank" in rep.phases
    assert rep.ranks_differing == [1]
    assert not rep.given_step_wrong


def test_characterize_says_loudly_when_given_step_is_wrong(tmp_path):
    _write(tmp_path / "a", range(10))
    _write(tmp_path / "b", range(10), diverge_at=4)
    rep = characterize(_case(tmp_path), step=7)
    assert rep.step == 4 and rep.given_step_wrong
    assert rep.message.startswith("GIVEN STEP 7 IS WRONG")


def test_characterize_identical_runs_have_no_step(tmp_path):
    _write(tmp_path / "a", range(5))
    _write(tmp_path / "b", range(5))
    rep = characterize(_case(tmp_path))
    assert rep.step is None and "agree on all 5 common steps" in rep.message


def test_characterize_first_step_and_source_update(tmp_path):
    _write(tmp_path / "a1", range(3), ranks=(1,))
    _write(tmp_path / "b1", range(3), diverge_at=0, ranks=(1,))
    case = Case(
        run_a=RunSpec(
            name="a", metrics=str(tmp_path / "a1"), source=SourceSpec(repo=str(tmp_path), rev="v1")
        ),
        run_b=RunSpec(
            name="b", metrics=str(tmp_path / "b1"), source=SourceSpec(repo=str(tmp_path), rev="v2")
        ),
    )
    rep = characterize(case)
    assert rep.step == 0
    assert rep.phases[:2] == ["update", "first-step"]
    assert rep.source_differs


def test_confirm_mismatch_records_evidence_and_warning(tmp_path):
    _write(tmp_path / "a", range(6))
    _write(tmp_path / "b", range(6), diverge_at=3)
    ledger = Ledger(tmp_path / "ws")
    confirm_mismatch(_case(tmp_path), ledger, step=5)
    st = ledger.state()
    assert st.evidence[0].kind == "metrics" and st.evidence[0].data.step == 3
    assert "GIVEN STEP 5 IS WRONG" in st.notes[0]["text"]


def test_characterize_missing_metrics_is_clear(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        characterize(_case(tmp_path))


def test_a_difference_first_seen_at_step_1_is_the_first_update(tmp_path):
    # a loss logged at step N reflects updates 0..N-1: step 1 is the first update's
    _write(tmp_path / "a", range(6), ranks=(1,))
    _write(tmp_path / "b", range(6), diverge_at=1, ranks=(1,))
    rep = characterize(_case(tmp_path))
    assert rep.step == 1 and rep.phases == ["first-update"]
    assert any("first optimizer step (step 0)" in f for f in rep.facts)
    scan = scan_request(_case(tmp_path), rep)
    assert scan.phase == "first-step"  # the probes judge it like the first step


def test_a_config_among_the_scan_paths_is_left_to_the_config_diff_not_scanned(tmp_path):
    _write(tmp_path / "a", range(6), ranks=(1,))
    _write(tmp_path / "b", range(6), diverge_at=1, ranks=(1,))
    (tmp_path / "train.py").write_text("import json\n")
    (tmp_path / "config.json").write_text("{}\n")
    case = _case(tmp_path, scan_paths=[str(tmp_path / "train.py"), str(tmp_path / "config.json")])
    scan = scan_request(case, characterize(case))
    assert str(tmp_path / "train.py") in scan.paths
    assert not any(p.endswith("config.json") for p in scan.paths)

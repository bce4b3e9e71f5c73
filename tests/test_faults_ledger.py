"""Kill -9 during ledger appends: every append that returned survives, a torn tail is
reported and moved aside by the next append, which works. The benchmark
(benchmarks/faults.py) runs 200 trials; CI runs 21, seven of each class."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import faults  # noqa: E402

TRIALS = 21


def test_kill9_during_appends_loses_no_returned_append(tmp_path):
    trials = faults.run_trials(TRIALS, seed=3, workdir=tmp_path, max_delay=0.3)
    failed = [t for t in trials if not t.survived]
    assert not failed, failed
    assert {t.klass for t in trials} == set(faults.CLASSES)
    assert any(t.writers > 1 for t in trials)
    # the kills land while appends are returning: the check is not vacuous
    assert sum(t.returned for t in trials) >= TRIALS


def test_kill9_checker_sees_a_lost_append(tmp_path):
    """The same trial, with the line of one returned append removed after the kill: the
    checker must count it lost."""

    def damage(ws: Path, reported: list[str]) -> None:
        if not reported:
            return
        p = ws / "ledger.jsonl"
        # the token opens its field's text, followed by a space (evidence) or its end
        marks = (f'"{reported[0]} '.encode(), f'"{reported[0]}"'.encode())
        kept = [ln for ln in p.read_bytes().split(b"\n") if not any(m in ln for m in marks)]
        p.write_bytes(b"\n".join(kept))

    t = None
    for k in range(10):  # until a trial had an append return before the kill
        t = faults.run_trial(tmp_path / f"t{k}", faults.CLASSES[0], random.Random(k), 0.4, damage)
        if t.returned:
            break
    assert t is not None and t.returned
    assert not t.survived and t.lost >= 1

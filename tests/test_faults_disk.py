"""A full disk (RLIMIT_FSIZE) under a ledger append and under a trace: one line, a non-zero
exit, nothing the ledger held is lost, and the next append works."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import faults  # noqa: E402


def test_full_disk_is_one_line_and_loses_nothing(tmp_path):
    results = faults.disk_faults(tmp_path)
    assert len(results) == 2
    for r in results:
        assert r.survived, r
    append, trace = results
    assert append.exit_code == 2 and append.lines == 1 and "disk full" in append.said
    assert "partial trace kept" in trace.said

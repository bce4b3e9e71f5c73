"""A data cursor whose state_dict leaves out its position: the state capture records the
attributes a cursor's state_dict does not hold, the round trip at the resume shows the one
the resume lost, and carrying those attributes across the resume (restore-cursors) proves
it; the verdict names that state_dict. A real small job with its own checkpoint code; its
reader's load_state_dict restores whatever it is given, and the save gives it too little."""

from __future__ import annotations

from pathlib import Path

from test_workflow_support import resume_case, resume_job

from triage_agent.job_objects import unsaved_attrs
from triage_agent.ledger import Ledger
from triage_agent.workflow.engine import run_workflow
from triage_agent.workflow.options import RunOptions

READER = '''"""Rows of a fixed table, read in order."""

import torch


class RowReader:
    def __init__(self):
        self.table = torch.randn(64, 6, generator=torch.Generator().manual_seed(9))
        self.epoch, self.row = 0, 0

    def state_dict(self):
        return {"epoch": self.epoch}

    def load_state_dict(self, state):
        self.__dict__.update(state)

    def take(self, n):
        rows = self.table[self.row : self.row + n]
        self.row += n
        return rows
'''
STATE_DICT_LINE = 11


def test_a_cursor_reports_what_its_state_dict_leaves_out():
    class Cursor:
        def __init__(self):
            self.epoch, self.pos, self.cache = 1, 7, object()

        def state_dict(self):
            return {"epoch": self.epoch}

    left = unsaved_attrs(Cursor(), {"epoch": 1})
    assert left.pop("state_dict_at").endswith(f":{Cursor.state_dict.__code__.co_firstlineno}")
    assert left == {"pos": 7}  # plain values only; what the state_dict holds is not repeated


def test_a_position_the_state_dict_leaves_out_is_proven_lost_at_the_resume(tmp_path: Path):
    (tmp_path / "reader.py").write_text(READER)
    job = resume_job(
        "reader.take(8)",
        "reader = RowReader()",
        imports="from reader import RowReader",
        state="reader",
    )
    (tmp_path / "train.py").write_text(job)
    case = resume_case(
        tmp_path,
        "reader-resume",
        6,
        2,
        source_roots=[str(tmp_path)],
        scan_paths=[str(tmp_path / "train.py"), str(tmp_path / "reader.py")],
    )
    ledger = Ledger(case.workspace)
    v = run_workflow(case, ledger, RunOptions(timeout_s=120, budget_minutes=6)).verdict
    assert v is not None and v.classification.value == "bug", v
    assert f"reader.py:{STATE_DICT_LINE}" in (v.location or ""), v.location
    st = ledger.state()
    assert st.hypotheses[v.hypothesis].category == "cursor-state"
    proof = [e for e in st.evidence if e.id in v.evidence and e.kind.value == "rerun"]
    assert proof and proof[-1].result.value == "supported"
    assert proof[-1].data.interventions == ["restore-cursors"]
    # the proof says which object and which attributes it put back
    assert "put back in the resumed process: " in proof[-1].summary
    assert "RowReader" in proof[-1].summary.split("put back in the resumed process: ")[1]

"""State at step boundaries on a job this file builds: a shard reader whose position is
saved and restored, then moved back by a call the loop makes only after a resume. The
workflow must find the call from the state manifests, name the loop's line and prove it by
suppressing the call in the resumed run alone."""

from __future__ import annotations

import json

from test_workflow_support import resume_case, resume_job

from triage_agent.ledger import Ledger
from triage_agent.records import EvidenceKind
from triage_agent.workflow.engine import run_workflow
from triage_agent.workflow.options import RunOptions

SHARDS = """import torch


class ShardReader:
    def __init__(self):
        g = torch.Generator().manual_seed(3)
        self.rows = torch.randn(512, 6, generator=g)
        self.offset = 0

    def restart_shard(self):
        self.offset = 0

    def take(self, n):
        out = self.rows[self.offset : self.offset + n]
        self.offset += n
        return out

    def state_dict(self):
        return {"offset": self.offset}

    def load_state_dict(self, s):
        self.offset = s["offset"]
"""

TRAIN = resume_job(
    "reader.take(16)",
    "reader = ShardReader()",
    imports="from shards import ShardReader",
    state="reader",
    on_resume="reader.restart_shard()",  # moves the restored cursor back: the cause
)


def _line(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_a_cursor_moved_after_resume_is_found_from_the_state_and_proven(tmp_path):
    (tmp_path / "shards.py").write_text(SHARDS)
    (tmp_path / "train.py").write_text(TRAIN)
    case = resume_case(
        tmp_path,
        "shard-resume",
        7,
        3,
        source_roots=[str(tmp_path)],
        scan_paths=[str(tmp_path / "train.py"), str(tmp_path / "shards.py")],
    )
    ledger = Ledger(case.workspace)
    v = run_workflow(case, ledger, RunOptions(timeout_s=120, budget_minutes=6)).verdict
    assert v is not None and v.classification.value == "bug", v
    assert f"train.py:{_line(TRAIN, 'reader.restart_shard()')}" in (v.location or "")
    st = ledger.state()
    proof = [e for e in st.evidence if e.id in v.evidence and e.kind == EvidenceKind.rerun]
    assert proof and proof[-1].result.value == "supported"
    recorded = json.dumps(proof[-1].model_dump(mode="json")["data"])
    assert "suppress shards:ShardReader.restart_shard" in recorded
    # the state evidence says what differed: the cursor B resumed with is not the one it
    # saved, the batch of step 4 differs, and no RNG stream does (none is used unseeded)
    manifest = next(e for e in st.evidence if e.kind == EvidenceKind.manifest)
    data = manifest.model_dump(mode="json")["data"]
    said = " ".join(data.get("differences") or data.get("extra", {}).get("differences", []))
    assert "B saved {'shards:ShardReader': {'offset': 64}}, B resumed" in said
    assert "step-4 rank 0: batch consumed" in said
    assert "RNG stream" not in said

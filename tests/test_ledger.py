import json
import multiprocessing as mp
import subprocess
import sys

import pytest
from test_ledger_support import add_evidence

from triage_agent.errors import LedgerError
from triage_agent.ledger import SCHEMA_VERSION, Ledger, sha256_file
from triage_agent.records import (
    Classification,
    Evidence,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    HypothesisStatus,
    Verdict,
)


def _hyp(ledger: Ledger) -> Hypothesis:
    return ledger.put_hypothesis(
        Hypothesis(statement="checkpoint omits a stream", category="rng-state")
    )


def test_ledger_fold_keeps_latest_hypothesis_and_all_evidence(tmp_path):
    ledger = Ledger(tmp_path)
    h = _hyp(ledger)
    add_evidence(ledger, h.id, EvidenceResult.refuted, summary="s")
    ledger.update_hypothesis(h.id, status=HypothesisStatus.refuted)
    state = ledger.state()
    assert state.hypotheses[h.id].status == HypothesisStatus.refuted
    assert len(state.evidence_for(h.id)) == 1
    assert state.events == 3


def _append_many(args):
    path, worker, n = args
    ledger = Ledger(path)
    for i in range(n):
        ledger.note(f"w{worker}-{i}", payload="x" * (50 * (i % 7)))


def test_ledger_concurrent_appends_never_interleave_or_lose(tmp_path):
    workers, n = 4, 60
    with mp.get_context("spawn").Pool(workers) as pool:
        pool.map(_append_many, [(str(tmp_path), w, n) for w in range(workers)])
    state = Ledger(tmp_path).state()
    texts = sorted(note["text"] for note in state.notes)
    assert texts == sorted(f"w{w}-{i}" for w in range(workers) for i in range(n))
    for line in (tmp_path / "ledger.jsonl").read_text().splitlines():
        json.loads(line)


def test_ledger_torn_last_line_is_reported_then_quarantined(tmp_path):
    ledger = Ledger(tmp_path)
    _hyp(ledger)
    ledger.note("second")
    size = ledger.path.stat().st_size
    with open(ledger.path, "ab") as f:
        f.write(b'{"v": 1, "kind": "note", "da')
    state = ledger.state()
    assert state.torn_tail is not None and state.torn_tail.offset == size
    assert len(state.hypotheses) == 1 and len(state.notes) == 1
    ledger.note("third")
    state = ledger.state()
    assert state.torn_tail is None
    texts = [n["text"] for n in state.notes]
    # the writer that moved the bytes aside says so in the ledger itself
    assert texts[0] == "second" and texts[2] == "third"
    assert f"moved to ledger.jsonl.torn-{size}" in texts[1] and "28 bytes" in texts[1]
    saved = tmp_path / f"ledger.jsonl.torn-{size}"
    assert saved.read_bytes() == b'{"v": 1, "kind": "note", "da'


def test_ledger_complete_last_line_missing_only_its_newline_is_kept(tmp_path):
    ledger = Ledger(tmp_path)
    _hyp(ledger)
    ledger.note("kept")
    ledger.path.write_bytes(ledger.path.read_bytes()[:-1])
    ledger.note("after")
    assert [n["text"] for n in ledger.state().notes] == ["kept", "after"]
    assert not list(tmp_path.glob("ledger.jsonl.torn-*"))


@pytest.mark.parametrize(
    "garble",
    [
        lambda line: line.replace(f'"v":{SCHEMA_VERSION}', '"v":99'),
        lambda line: line.replace('"ts":', '"t{{{garbage":'),
        lambda line: line.replace('"id":', '"i d":'),
    ],
)
def test_ledger_parseable_but_garbled_line_is_corruption(tmp_path, garble):
    ledger = Ledger(tmp_path)
    _hyp(ledger)
    ledger.note("a")
    ledger.note("b")
    lines = ledger.path.read_text().splitlines(keepends=True)
    bad = garble(lines[1])
    assert bad != lines[1]
    lines[1] = bad
    ledger.path.write_text("".join(lines))
    with pytest.raises(LedgerError, match=r"ledger.jsonl:2 .*corrupted"):
        ledger.state()


def test_ledger_corrupted_middle_line_names_the_line(tmp_path):
    ledger = Ledger(tmp_path)
    _hyp(ledger)
    ledger.note("a")
    ledger.note("b")
    lines = ledger.path.read_text().splitlines(keepends=True)
    lines[1] = "{not json}\n"
    ledger.path.write_text("".join(lines))
    with pytest.raises(LedgerError, match=r"ledger.jsonl:2 "):
        ledger.state()


def test_ledger_refuses_verdict_without_execution_evidence(tmp_path):
    ledger = Ledger(tmp_path)
    h = _hyp(ledger)
    static = add_evidence(ledger, h.id, EvidenceResult.observed, EvidenceKind.static, "probe hit")
    with pytest.raises(LedgerError, match="must name the supported hypothesis"):
        ledger.set_verdict(
            Verdict(classification=Classification.bug, statement="x", evidence=[static.id])
        )
    with pytest.raises(LedgerError, match="not supported"):
        ledger.set_verdict(
            Verdict(hypothesis=h.id, classification=Classification.unknown, statement="x")
        )
    refuted = add_evidence(ledger, h.id, EvidenceResult.refuted, summary="no")
    other = add_evidence(ledger, "H-other", EvidenceResult.supported, EvidenceKind.rerun, "other")
    run = add_evidence(ledger, h.id, EvidenceResult.supported, summary="ran")
    ledger.update_hypothesis(
        h.id, status=HypothesisStatus.supported, reason="the refuting piece is a static guess"
    )
    # the hypothesis is supported, but this chain does not cite what supports it
    with pytest.raises(LedgerError, match="execution evidence"):
        ledger.set_verdict(
            Verdict(
                hypothesis=h.id,
                classification=Classification.bug,
                statement="x",
                evidence=[static.id, refuted.id, other.id],
            )
        )
    ledger.set_verdict(
        Verdict(
            hypothesis=h.id,
            classification=Classification.bug,
            statement="x",
            evidence=[static.id, run.id],
        )
    )
    assert ledger.state().verdict.hypothesis == h.id


def test_ledger_evidence_recorded_twice_under_one_id_is_kept_once(tmp_path):
    ledger = Ledger(tmp_path)
    ev = Evidence(kind=EvidenceKind.static, result=EvidenceResult.observed, summary="first")
    ledger.add_evidence(ev)
    ledger.note("between")
    ledger.add_evidence(ev.model_copy(update={"summary": "again"}))
    st = ledger.state()
    assert [e.summary for e in st.evidence] == ["again"]


def test_ledger_unknown_evidence_in_verdict_is_refused(tmp_path):
    ledger = Ledger(tmp_path)
    with pytest.raises(LedgerError, match="unknown evidence"):
        ledger.set_verdict(
            Verdict(classification=Classification.unknown, statement="?", evidence=["E-nope"])
        )


def test_ledger_artifact_records_sha256(tmp_path):
    ledger = Ledger(tmp_path / "ws")
    f = tmp_path / "ws" / "out.txt"
    f.parent.mkdir()
    f.write_bytes(b"bits")
    art = ledger.artifact(f, role="stdout")
    assert art.path == "out.txt" and art.bytes == 4
    assert art.sha256 == sha256_file(f)
    import hashlib

    assert art.sha256 == hashlib.sha256(b"bits").hexdigest()


def test_cli_corrupted_ledger_is_one_line_error(tmp_path):
    ws = tmp_path / ".triage"
    ws.mkdir()
    (ws / "ledger.jsonl").write_text('{"v":1}\n{"kind": "note", "data": {}}\n')
    proc = subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "ledger", "show", "-w", str(ws)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "ledger.jsonl:1" in proc.stderr

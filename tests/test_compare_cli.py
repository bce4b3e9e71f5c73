"""`triage compare`: exit codes, formats, exports; the comparator never imports torch."""

from __future__ import annotations

import json
import subprocess
import sys

from test_compare_support import chain, run_compare_cli, write_receiver_only_pair, write_trace

from triage_agent.compare.synth import SynthSpec, write_pair


def test_cli_exit_codes_and_formats(tmp_path, monkeypatch, capsys):
    a, b = write_pair(SynthSpec(events=300, diverge_at=200, insert_at=[50]), tmp_path)
    code, out, _ = run_compare_cli(monkeypatch, capsys, a, a)
    assert code == 0 and "identical" in out
    code, out, _ = run_compare_cli(monkeypatch, capsys, a, b, "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["status"] == "diverged" and doc["ranks"][0]["origin"]["a"]["index"] == 200
    code, out, _ = run_compare_cli(monkeypatch, capsys, a, b, "--format", "md", "--rank", "0")
    assert code == 1 and "**Origin** (origin)" in out and "aten::clone" in out
    trace = tmp_path / "view.json"
    code, _, _ = run_compare_cli(monkeypatch, capsys, a, b, "--format", "perfetto", "-o", trace)
    view = json.loads(trace.read_text())["traceEvents"]
    assert code == 1
    assert {e["pid"] for e in view if e["ph"] == "X"} == {1, 2}
    assert any(e["ph"] == "i" and e["name"].startswith("origin") for e in view)
    assert any(e.get("cname") == "terrible" for e in view)


def test_cli_says_what_to_widen_in_sentences_not_a_dumped_record(tmp_path, monkeypatch, capsys):
    a, b = write_receiver_only_pair(tmp_path)
    for fmt in ("table", "md"):
        code, out, _ = run_compare_cli(monkeypatch, capsys, a, b, "-f", fmt)
        said = " ".join(out.split())  # the table is wrapped to the terminal
        assert code == 1 and "widen the capture. Start the window before step 0" in said, said
        assert "steps:" not in said and "level:" not in said


def test_cli_malformed_names_file_and_line(tmp_path, monkeypatch, capsys):
    p = write_trace(tmp_path / "a", chain(4))
    write_trace(tmp_path / "b", chain(4))
    lines = p.read_text().splitlines()
    lines[2] = '{"type": "event", "seq": 1, "step": 0, "kind": "nope"}'
    p.write_text("\n".join(lines) + "\n")
    code, _, err = run_compare_cli(monkeypatch, capsys, tmp_path / "a", tmp_path / "b")
    assert code == 2
    assert "trace_rank00000.jsonl:3" in err and "Traceback" not in err


def test_cli_missing_path_is_exit_2(tmp_path, monkeypatch, capsys):
    code, _, err = run_compare_cli(monkeypatch, capsys, tmp_path / "nope", tmp_path / "nope2")
    assert code == 2 and "no such file" in err


def test_comparator_does_not_import_torch(tmp_path):
    a, b = write_pair(SynthSpec(events=50, diverge_at=10), tmp_path)
    code = (
        "import sys; from triage_agent.compare import load_run, compare_runs, to_markdown;"
        f"r = compare_runs(load_run({str(a)!r}), load_run({str(b)!r})); to_markdown(r);"
        "assert 'torch' not in sys.modules, 'torch imported'; print(r.status)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "diverged"


def test_cli_identical_but_incomplete_is_exit_3(tmp_path, monkeypatch, capsys):
    a, b = write_pair(SynthSpec(events=300), tmp_path)
    f = b / "trace_rank00000.jsonl"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])  # B crashed mid-write: a torn last line
    code, out, _ = run_compare_cli(monkeypatch, capsys, a, b)
    assert code == 3 and "identical" in out and "incomplete" in out

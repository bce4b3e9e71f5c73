"""Every reader, fed mutated real files through the CLI: a one-line error (exit 2) or a
valid result, never a traceback. The benchmark (benchmarks/fuzz_readers.py) runs 10,000
inputs per format; CI runs a few hundred of each."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import fuzz_readers as fz  # noqa: E402

INPUTS = 250


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return fz.build_seeds(tmp_path_factory.mktemp("seeds"), list(fz.FORMATS))


@pytest.mark.parametrize("fmt", list(fz.FORMATS))
def test_fuzz_reader_gives_one_line_errors_or_results(seeds, fmt, tmp_path):
    tally = fz.fuzz_format(fmt, seeds[fmt], INPUTS, seed=1, scratch=tmp_path)
    assert tally.inputs == INPUTS
    found = "\n".join(
        f"{f['kind']}: {f['key']} {f['argv']} {f['mutations']}" for f in tally.failures
    )
    assert tally.failed == 0, found
    # the mutations reach both sides: some inputs still read, many are refused
    assert tally.outcomes["valid"] > 0 and tally.outcomes["error"] > 0


def test_fuzz_seeds_are_valid_inputs(seeds):
    """Unmutated, every seed goes through its command as a result, not an error."""
    for name, fmt in fz.FORMATS.items():
        res = fz.run_cli(fmt.argv(seeds[name], fz.simplest))
        assert res.kind == "valid", (name, res.stderr)


def test_fuzz_harness_counts_an_escaped_exception_as_a_traceback():
    def crashes() -> None:
        {}["missing"]

    res = fz.run_cli([], entry=crashes)
    assert res.kind == "traceback" and "KeyError" in res.detail


def test_fuzz_harness_requires_exactly_one_error_line():
    assert fz.classify(2, "error: bad input\n") == "error"
    assert fz.classify(2, "warning: torn tail\nerror: bad input\n") == "error"
    assert fz.classify(2, "error: a\nerror: b\n") == "not one line"
    assert fz.classify(2, "Usage: triage\nerror: x\n") == "not one line"
    assert fz.classify(4, "error: x\n") == "not one line"
    assert fz.classify(1, "") == "valid"


# Reproducers of what fuzzing found, one per defect: each was a traceback before its fix.


def _compare(*paths: Path) -> fz.Outcome:
    return fz.run_cli(["compare", *map(str, paths)])


def test_fuzz_found_deeply_nested_jsonl_record_is_one_line(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(fz.FIXTURES / "megatron_lm" / "run_a", run)
    f = run / "rank_000000.jsonl"
    f.write_text("[" * 100_000 + "]" * 100_000 + "\n" + f.read_text())
    res = _compare(run, fz.FIXTURES / "megatron_lm" / "run_b")
    assert res.kind == "error" and "rank_000000.jsonl:1" in res.stderr


def test_fuzz_found_chrome_trace_not_utf8_is_one_line(tmp_path):
    p = tmp_path / "pair.json"
    p.write_bytes((fz.FIXTURES / "opguard_pair.json").read_bytes().replace(b'"', b'"\xff', 1))
    res = _compare(p)
    assert res.kind == "error" and "not valid JSON" in res.stderr


def test_fuzz_found_chrome_corrupt_deflate_stream_is_one_line(tmp_path):
    z = bytearray(gzip.compress((fz.FIXTURES / "opguard_pair.json").read_bytes(), mtime=0))
    z[12] ^= 0xFF  # just past the 10-byte header: the deflate data itself is bad
    p = tmp_path / "pair.json.gz"
    p.write_bytes(bytes(z))
    res = _compare(p)
    assert res.kind == "error" and "cannot read" in res.stderr, res.detail


def test_fuzz_found_chrome_unhashable_pid_is_one_line(tmp_path):
    doc = json.loads((fz.FIXTURES / "opguard_pair.json").read_text())
    meta = next(e for e in doc["traceEvents"] if e.get("ph") == "M")
    meta["pid"] = {"a": 1}
    p = tmp_path / "pair.json"
    p.write_text(json.dumps(doc))
    res = _compare(p)
    assert res.kind == "error" and "pid must be an integer or a string" in res.stderr


def test_fuzz_found_chrome_non_numeric_ts_is_one_line(tmp_path):
    doc = json.loads((fz.FIXTURES / "opguard_pair.json").read_text())
    op = next(e for e in doc["traceEvents"] if isinstance((e.get("args") or {}).get("io"), dict))
    op["ts"] = "soon"
    p = tmp_path / "pair.json"
    p.write_text(json.dumps(doc))
    res = _compare(p)
    assert res.kind == "error" and "ts must be a number" in res.stderr


@pytest.mark.parametrize(("key", "value"), [("occurrence", {"a": 1}), ("rank", [0])])
def test_fuzz_found_megatron_unhashable_field_is_one_line(tmp_path, key, value):
    run = tmp_path / "run"
    shutil.copytree(fz.FIXTURES / "megatron_lm" / "run_a", run)
    f = run / "rank_000000.jsonl"
    lines = f.read_text().splitlines()
    rec = json.loads(lines[0])
    rec[key] = value
    lines[0] = json.dumps(rec)
    f.write_text("\n".join(lines) + "\n")
    res = _compare(run, fz.FIXTURES / "megatron_lm" / "run_b")
    assert res.kind == "error" and f"{key} must be an integer" in res.stderr


def test_fuzz_found_deeply_nested_toml_is_one_line(tmp_path):
    case = tmp_path / "triage.toml"
    case.write_text("[case]\nname = " + "[" * 5000 + "]" * 5000 + "\n")
    res = fz.run_cli(["ledger", "show", "--case", str(case)])
    assert res.kind == "error" and "nested too deeply" in res.stderr


def test_fuzz_found_deeply_nested_metrics_line_is_one_line(tmp_path, seeds):
    run = tmp_path / "a"
    shutil.copytree(seeds["metrics"] / "a", run)
    f = run / "metrics_rank0.jsonl"
    f.write_text("[" * 100_000 + "]" * 100_000 + "\n" + f.read_text())
    res = fz.run_cli(["metrics", "diff", str(run), str(seeds["metrics"] / "b")])
    assert res.kind == "error" and "metrics_rank0.jsonl:1" in res.stderr


def _native_line(seeds, tmp_path, edit) -> tuple[Path, Path]:
    a = tmp_path / "a"
    shutil.copytree(seeds["native"] / "a", a)
    f = a / "trace_rank00000.jsonl"
    lines = f.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith('{"type":"event"'))
    lines[k] = edit(lines[k])
    f.write_text("\n".join(lines) + "\n")
    return a, seeds["native"] / "b"


def test_fuzz_found_native_unhashable_phase_is_one_line(tmp_path, seeds):
    def edit(line: str) -> str:
        rec = json.loads(line)
        rec["phase"] = ["forward"]
        return json.dumps(rec, separators=(",", ":"))

    a, b = _native_line(seeds, tmp_path, edit)
    res = fz.run_cli(["compare", str(a), str(b), "--strict"])
    assert res.kind == "error" and "phase" in res.stderr


def test_fuzz_found_native_huge_integer_is_one_line(tmp_path, seeds):
    a, b = _native_line(
        seeds, tmp_path, lambda line: line.replace('"seq":', '"seq":1' + "0" * 5000 + ',"x":', 1)
    )
    res = fz.run_cli(["compare", str(a), str(b), "--strict"])
    assert res.kind == "error" and "not valid JSON" in res.stderr


def test_fuzz_found_native_corrupt_gzip_stream_is_one_line(tmp_path, seeds):
    a = tmp_path / "a"
    shutil.copytree(seeds["native"] / "a", a)
    f = a / "trace_rank00000.jsonl"
    z = bytearray(gzip.compress(f.read_bytes(), mtime=0))
    z[12] ^= 0xFF  # the deflate data, not the header or the checksum
    f.unlink()
    (a / "trace_rank00000.jsonl.gz").write_bytes(bytes(z))
    res = _compare(a, seeds["native"] / "b")
    assert res.kind == "error" and "not a readable gzip file" in res.stderr


def test_fuzz_found_toml_integer_past_the_digit_limit_is_one_line(tmp_path):
    case = tmp_path / "triage.toml"
    case.write_text("[case]\nmismatch_step = 1" + "0" * 5000 + "\n")
    res = fz.run_cli(["ledger", "show", "--case", str(case)])
    assert res.kind == "error" and "not valid TOML" in res.stderr


def test_debugmode_log_opening_with_a_module_line_is_detected_as_debugmode(seeds):
    from triage_agent.compare.importers import detect

    log = seeds["debugmode"] / "a.log"
    assert log.read_text().lstrip().startswith("[nn.Mod]")
    assert detect(log) == "debugmode"
    assert _compare(log, seeds["debugmode"] / "b.log").kind == "valid"


@pytest.mark.parametrize("bad", [b"\xed\xa0\x80", b"\\ud800"], ids=["utf8-surrogate", "escape"])
@pytest.mark.parametrize("out", ["table", "json"])
def test_fuzz_found_lone_surrogate_in_a_name_is_one_line(tmp_path, seeds, bad, out):
    """Valid JSON (or bytes json.loads accepts) naming an op with a lone surrogate: before,
    it was read, and printing the name failed."""
    for fmt, target, key in (
        ("native", "a/trace_rank00000.jsonl", b'"name":"'),
        ("bridge", "a/stream_pp0_tp0_cp0_dp0.fp", b'"op": "'),
        ("chrome", "pair.json", b'"name": "aten::'),
    ):
        d = tmp_path / fmt / out / bad.hex()
        shutil.copytree(seeds[fmt], d)
        f = d / target
        raw = f.read_bytes()
        assert key in raw
        f.write_bytes(raw.replace(key, key + bad))
        argv = ["compare", str(d / target.split("/")[0])]
        if fmt != "chrome":
            argv.append(str(d / "b"))
        res = fz.run_cli([*argv, "--format", out])
        assert res.kind == "error", (fmt, res.detail or res.stderr)


def test_fuzz_found_lone_surrogate_escape_in_a_metric_name_is_one_line(tmp_path, seeds):
    run = tmp_path / "a"
    shutil.copytree(seeds["metrics"] / "a", run)
    f = run / "metrics_rank0.jsonl"
    f.write_text(f.read_text().replace('"loss"', '"\\ud800loss"'))
    res = fz.run_cli(["metrics", "diff", str(run), str(seeds["metrics"] / "b")])
    assert res.kind == "error" and "metrics_rank0.jsonl" in res.stderr, res.detail

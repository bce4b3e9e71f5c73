"""Fuzzing the readers: mutated real files of every input format, through the CLI, counted.

Why: the CLI promises that bad input gives one line and exit 2, never a traceback. A single
hand-written bad file per review proves little; this feeds each reader thousands of
mutations of real files and counts what came out.

Each input is one real file of its format with 1-3 mutations drawn by hypothesis:
truncation, bit flips, byte edits, line edits (duplicate, drop, swap, CRLF, no final
newline), wrong types, huge numbers, deep nesting, invalid UTF-8, gzip garbage, an empty
or degenerate file. It goes through the CLI in process (``triage_agent.cli.app.main``, the
function the ``triage`` script runs, with its own exception mapping), with the seed file of
the other run beside it:

  format       command                              seed files (real, written by the tool)
  native       compare A B [--strict]               tracer on a tiny torch model, 2 ranks
  bridge       compare A B                          tests/fixtures/compare/bridge
  megatron-lm  compare A B                          tests/fixtures/compare/megatron_lm
  debugmode    compare A B [--input-format ...]     torch DebugMode hash logs
  chrome       compare PAIR                         tests/fixtures/compare/opguard_pair.json
  metrics      metrics diff A B                     MetricLog, 2 ranks, a resumed session
  manifest     manifest diff A B                    build_manifest of a model and AdamW
  case         ledger show --case FILE              the demo's triage.toml, a case with a rev
  ledger       ledger show | export                 written through the Ledger API

Outcomes: ``valid`` (exit 0, 1 or 3), ``error`` (exit 2 with exactly one ``error:`` line on
stderr and nothing else but warnings), and failures: ``traceback`` (an exception escaped
``main``), ``not one line`` (exit 2 with other stderr, or another exit code) and ``hang``
(past ``--timeout`` seconds). Each failure is saved with its input under ``--failures``.

    python benchmarks/fuzz_readers.py [--inputs 10000] [--formats native,ledger] [--seed 0]
                                      [--jobs 2] [--workdir DIR] [--failures DIR]

Limits: mutations are of a few real seed files, not grammar-generated documents; a
reader's deeper states are reached only as far as 1-3 mutations of a real file go.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import io
import itertools
import json
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import seed as hyp_seed
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the benchmarks' shared code
from benchmarks.md_table import markdown_table  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "compare"
# thousands of small files are written and removed: memory is much faster than a disk
SCRATCH = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())

# -- seeds: real files of each format ---------------------------------------------------


def _tiny_model(flip: bool):
    import torch

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    if flip:
        with torch.no_grad():
            m[2].weight.view(torch.int32)[0, 0] ^= 1 << 16
    return m


def _native_seed(d: Path) -> None:
    import torch

    from triage_agent.fingerprint import CaptureConfig, Tracer

    for run, flip in (("a", False), ("b", True)):
        for rank in (0, 1):
            m = _tiny_model(flip)
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
            cfg = CaptureConfig(out_dir=d / run, steps=(0, 1), level="op", run_id=run)
            g = torch.Generator().manual_seed(rank)
            with Tracer(cfg, rank=rank, world_size=2) as tr:
                for s in range(2):
                    tr.step(s)
                    m(torch.randn(3, 4, generator=g)).pow(2).sum().backward()
                    opt.step()
                    opt.zero_grad()


def _copy_fixture(name: str) -> Callable[[Path], None]:
    def build(d: Path) -> None:
        shutil.copytree(FIXTURES / name / "run_a", d / "a")
        shutil.copytree(FIXTURES / name / "run_b", d / "b")

    return build


def _debugmode_seed(d: Path) -> None:
    import torch
    from torch.utils._debug_mode import DebugMode

    d.mkdir(parents=True)
    for run, eps in (("a", 0.0), ("b", 1e-7)):
        torch.manual_seed(0)
        lin = torch.nn.Linear(8, 8)
        x = torch.randn(4, 8)
        with DebugMode(record_nn_module=True) as dm, DebugMode.log_tensor_hashes(hash_inputs=True):
            y = lin(x).relu() + torch.full((4, 8), eps)
            y.sum()
        (d / f"{run}.log").write_text(dm.debug_string())


def _chrome_seed(d: Path) -> None:
    d.mkdir(parents=True)
    shutil.copy(FIXTURES / "opguard_pair.json", d / "pair.json")


def _metrics_seed(d: Path) -> None:
    import torch

    from triage_agent.metrics import MetricLog

    for run in ("a", "b"):
        for rank in (0, 1):
            log = MetricLog(d / run, rank=rank, run_id=run)
            for step in range(6):
                if run == "b" and step == 3:  # run B resumes here, in a new process
                    log.close()
                    log = MetricLog(d / run, rank=rank, resumed_from=3, run_id=run)
                bump = 1e-7 if run == "b" and step >= 4 else 0.0
                log.log(
                    step,
                    loss=torch.tensor(2.5 - step / 8 + bump, dtype=torch.float32),
                    grad_norm=torch.tensor(0.75 + bump, dtype=torch.bfloat16),
                    lr=1e-3 * (step + 1),
                    tokens=4096 * step,
                )
            log.close()


def _manifest_seed(d: Path) -> None:
    import torch

    from triage_agent.manifest import build_manifest, save_manifest

    for run, flip in (("a", False), ("b", True)):
        m = _tiny_model(flip)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        m(torch.ones(2, 4)).sum().backward()
        opt.step()
        state = {"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": 1}
        man = build_manifest(state, data_cursor={"consumed": 96, "epoch": 1}, label=run, rank=0)
        save_manifest(man, d / f"{run}.json")


def _write_ledger(ws: Path) -> None:
    from triage_agent import records as r
    from triage_agent.ledger import Ledger

    led = Ledger(ws)
    led.set_case(r.Case(name="fuzz", run_a=r.RunSpec(name="a"), run_b=r.RunSpec(name="b")))
    led.stage("baseline", "done", steps=41)
    hyp = led.put_hypothesis(
        r.Hypothesis(statement="checkpoint load omits RNG state", category="rng-state")
    )
    led.put_hypothesis(r.Hypothesis(statement="atomic accumulation", category="nondeterminism"))
    said, argv = "rng_resume: torch CPU stream NOT restored", ["python", "repro.py"]
    ev = led.add_evidence(
        r.Evidence(
            hypotheses=[hyp.id], kind="reproducer", result="supported", summary=said, argv=argv
        )
    )
    led.update_hypothesis(hyp.id, status=r.HypothesisStatus.supported)
    led.note("a note with unicode: \u00e9\u4e2d [bold]markup[/]")
    led.set_verdict(
        r.Verdict(
            hypothesis=hyp.id,
            classification=r.Classification.bug,
            statement="step 37: RNG state not restored on resume",
            evidence=[ev.id],
            next_action="save every RNG stream with the checkpoint",
        )
    )


def _case_seed(d: Path) -> None:
    from reproducers.demo.case import demo_toml

    source = Path(__file__).with_name("fuzz_readers_case.toml").read_text()  # a source revision
    for name, text in (("demo", demo_toml()), ("source", source)):
        (d / name).mkdir(parents=True)
        (d / name / "triage.toml").write_text(text)
        _write_ledger(d / name / ".triage")


def _ledger_seed(d: Path) -> None:
    _write_ledger(d / "ws")


# -- the formats: seed, files mutated, command ------------------------------------------

Draw = Callable[[Any], Any]


@dataclass(frozen=True)
class Format:
    name: str
    build: Callable[[Path], None]
    targets: tuple[str, ...]  # files of the seed directory that get mutated
    argv: Callable[[Path, Draw], list[str]]  # the command for an input directory
    gz: bool = False  # the reader accepts a gzipped file (named .gz)
    json_lines: bool = True  # one JSON record per line (else one document, or not JSON)


def _compare_argv(native: bool = False, fmt: str | None = None):
    def argv(d: Path, draw: Draw) -> list[str]:
        out = draw(st.sampled_from(["table", "json", "md", "perfetto"]))
        args = ["compare", *(str(d / x) for x in ("a", "b")), "--format", out]
        if out == "perfetto":
            args += ["--out", str(d / "view.json")]
        if native and draw(st.booleans()):
            args.append("--strict")
        if fmt and draw(st.booleans()):
            args += ["--input-format", fmt]
        return args

    return argv


def _debugmode_argv(d: Path, draw: Draw) -> list[str]:
    args = ["compare", str(d / "a.log"), str(d / "b.log")]
    if draw(st.booleans()):
        args += ["--input-format", "debugmode"]
    return args + ["--format", draw(st.sampled_from(["table", "json"]))]


def _chrome_argv(d: Path, draw: Draw) -> list[str]:
    # a gzipped pair is named pair.json.gz: fuzz_format renames the argument with the file
    return ["compare", str(d / "pair.json"), "--format", draw(st.sampled_from(["table", "json"]))]


def _metrics_argv(d: Path, draw: Draw) -> list[str]:
    return ["metrics", "diff", str(d / "a"), str(d / "b"), *draw(st.sampled_from([[], ["--json"]]))]


def _manifest_argv(d: Path, draw: Draw) -> list[str]:
    return ["manifest", "diff", str(d / "a.json"), str(d / "b.json")] + draw(
        st.sampled_from([[], ["--json"], ["--limit", "3"]])
    )


def _case_argv(d: Path, draw: Draw) -> list[str]:
    case = d / draw(st.sampled_from(["demo", "source"])) / "triage.toml"
    return ["ledger", "show", "--case", str(case)]


def _ledger_argv(d: Path, draw: Draw) -> list[str]:
    how = draw(st.sampled_from([["show"], ["export", "--format", "json"], ["export"]]))
    return ["ledger", *how, "-w", str(d / "ws")]


_NATIVE_FILES = tuple(f"{r}/trace_rank0000{k}.jsonl" for r in "ab" for k in (0, 1))
_BRIDGE_FILES = tuple(f"{r}/stream_pp0_tp0_cp0_dp{k}.fp" for r in "ab" for k in (0, 1))
_MEGATRON_FILES = tuple(f"{r}/rank_00000{k}.jsonl" for r in "ab" for k in (0, 1))

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("native", _native_seed, _NATIVE_FILES, _compare_argv(native=True), gz=True),
        Format(
            "bridge", _copy_fixture("bridge"), _BRIDGE_FILES, _compare_argv(fmt="bridge"), gz=True
        ),
        Format(
            "megatron-lm",
            _copy_fixture("megatron_lm"),
            _MEGATRON_FILES,
            _compare_argv(fmt="megatron-lm"),
            gz=True,
        ),
        Format("debugmode", _debugmode_seed, ("a.log", "b.log"), _debugmode_argv, json_lines=False),
        Format("chrome", _chrome_seed, ("pair.json",), _chrome_argv, gz=True, json_lines=False),
        Format(
            "metrics",
            _metrics_seed,
            tuple(f"{r}/metrics_rank{k}.jsonl" for r in "ab" for k in (0, 1)),
            _metrics_argv,
        ),
        Format("manifest", _manifest_seed, ("a.json", "b.json"), _manifest_argv, json_lines=False),
        Format(
            "case",
            _case_seed,
            ("demo/triage.toml", "source/triage.toml"),
            _case_argv,
            json_lines=False,
        ),
        Format("ledger", _ledger_seed, ("ws/ledger.jsonl",), _ledger_argv),
    )
}


def build_seeds(root: Path, names: list[str]) -> dict[str, Path]:
    """Write the seed files of each format under ``root/<format>`` (kept when present)."""
    out = {}
    for name in names:
        d = root / name
        if not (d / ".complete").exists():
            shutil.rmtree(d, ignore_errors=True)
            FORMATS[name].build(d)
            (d / ".complete").write_text("")
        out[name] = d
    return out


# -- mutations ----------------------------------------------------------------------------

INTERESTING = [b"\x00", b"\xff", b"\n", b'"', b"{", b"}", b"[", b"]", b",", b":", b"\\", b"\r"]
HUGE = [
    "1e999",
    "-1e999",
    "1" + "0" * 5000,  # past Python's int-from-string digit limit
    "18446744073709551616",
    "-9223372036854775809",
    "NaN",
    "Infinity",
    "-Infinity",
    "1.7976931348623157e309",
    "4e-330",
    "-0.0",
    "99999999999999999999.5",
]
BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"]
# valid JSON escapes of text that is not valid Unicode: lone surrogates
BAD_ESCAPES = [b"\\ud800", b"\\udfff", b"\\uDBFF\\u0041"]
_NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")
_TOML_RHS = re.compile(rb"(?m)^([A-Za-z_][\w.\-]*\s*=\s*)(.+)$")
TOML_VALUES = [
    b"1",
    b'"s"',
    b"[]",
    b"{}",
    b"true",
    b"inf",
    b"nan",
    b"-0",
    b"[[1]]",
    b"{ a = 1 }",
    b"1979-05-27T07:32:00Z",
    b'[["x"], 1]',
    b"99999999999999999999",
    b'"../../../../etc/passwd"',
]
WRONG = [None, True, 0, -1, 2**63, 1.5, "", "x", [], {}, [1, "a"], {"a": {"b": None}}]


def _pos(draw: Draw, b: bytes) -> int:
    return draw(st.integers(0, len(b)))


def m_truncate(b: bytes, draw: Draw) -> bytes:
    return b[: _pos(draw, b)]


def m_bitflip(b: bytes, draw: Draw) -> bytes:
    if not b:
        return b
    ba = bytearray(b)
    for _ in range(draw(st.integers(1, 8))):
        ba[draw(st.integers(0, len(ba) - 1))] ^= 1 << draw(st.integers(0, 7))
    return bytes(ba)


def m_bytes(b: bytes, draw: Draw) -> bytes:
    i = _pos(draw, b)
    chunk = draw(st.sampled_from(INTERESTING) | st.binary(min_size=1, max_size=8))
    how = draw(st.sampled_from(["insert", "overwrite", "delete"]))
    if how == "insert":
        return b[:i] + chunk + b[i:]
    if how == "overwrite":
        return b[:i] + chunk + b[i + len(chunk) :]
    return b[:i] + b[i + draw(st.integers(1, 64)) :]


def m_lines(b: bytes, draw: Draw) -> bytes:
    lines = b.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    j = draw(st.integers(0, len(lines) - 1))
    how = draw(st.sampled_from(["dup", "drop", "swap", "blank", "crlf", "no-newline", "repeat"]))
    if how == "dup":
        lines.insert(i, lines[i])
    elif how == "drop":
        del lines[i]
    elif how == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    elif how == "blank":
        lines.insert(i, draw(st.sampled_from([b"", b"   ", b"\t"])))
    elif how == "crlf":
        return b.replace(b"\n", b"\r\n")
    elif how == "no-newline":
        return b.rstrip(b"\n")
    else:  # one line many times: a long file
        lines[i:i] = [lines[i]] * draw(st.integers(2, 2000))
    return b"\n".join(lines)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for k, v in enumerate(obj[:50]):
            out += _paths(v, (*prefix, k))
    return out


def _replace_at(obj: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    obj[path[0]] = _replace_at(obj[path[0]], path[1:], value)
    return obj


def _json_edit(b: bytes, draw: Draw, json_lines: bool, make: Callable[[Draw], Any]) -> bytes:
    """Replace one value, somewhere in one JSON record, with ``make(draw)``."""
    if json_lines:
        lines = b.split(b"\n")
        k = draw(st.integers(0, len(lines) - 1))
        target = lines[k]
    else:
        target = b
    try:
        obj = json.loads(target)
    except (ValueError, RecursionError):  # an earlier mutation broke it: nothing to edit
        return b
    paths = _paths(obj)
    path = paths[draw(st.integers(0, len(paths) - 1))]
    compact = draw(st.booleans())
    new = json.dumps(
        _replace_at(obj, path, make(draw)), separators=(",", ":") if compact else None
    ).encode()
    if json_lines:
        lines[k] = new
        return b"\n".join(lines)
    return new


def m_wrong_type(b: bytes, draw: Draw, json_lines: bool, toml: bool) -> bytes:
    if toml:
        rhs = list(_TOML_RHS.finditer(b))
        if not rhs:
            return b
        m = rhs[draw(st.integers(0, len(rhs) - 1))]
        return b[: m.start(2)] + draw(st.sampled_from(TOML_VALUES)) + b[m.end(2) :]
    return _json_edit(b, draw, json_lines, lambda d: d(st.sampled_from(WRONG)))


def m_huge(b: bytes, draw: Draw) -> bytes:
    nums = list(_NUMBER.finditer(b[:200_000]))
    if not nums:
        return b
    m = nums[draw(st.integers(0, len(nums) - 1))]
    return b[: m.start()] + draw(st.sampled_from(HUGE)).encode() + b[m.end() :]


def m_nesting(b: bytes, draw: Draw, toml: bool) -> bytes:
    depth = draw(st.sampled_from([30, 64, 200, 1000, 5000, 100_000]))
    shape = draw(st.sampled_from(["list", "dict", "paren"]))
    if shape == "list":
        deep = b"[" * depth + b"]" * depth
    elif shape == "dict":
        deep = (b"{ a = " if toml else b'{"a":') * depth + b"1" + b"}" * depth
    else:
        deep = b"(" * depth + b")" * depth
    nums = list(_NUMBER.finditer(b[:200_000]))
    if toml or not nums:
        rhs = list(_TOML_RHS.finditer(b))
        if rhs:
            m = rhs[draw(st.integers(0, len(rhs) - 1))]
            return b[: m.start(2)] + deep + b[m.end(2) :]
        return deep
    m = nums[draw(st.integers(0, len(nums) - 1))]
    return b[: m.start()] + deep + b[m.end() :]


def m_utf8(b: bytes, draw: Draw) -> bytes:
    quotes = [m.start() + 1 for m in re.finditer(rb'"', b[:200_000])]
    i = quotes[draw(st.integers(0, len(quotes) - 1))] if quotes else _pos(draw, b)
    return b[:i] + draw(st.sampled_from(BAD_UTF8 + BAD_ESCAPES)) + b[i:]


def m_gzip(b: bytes, draw: Draw) -> bytes:
    z = gzip.compress(b, mtime=0)
    how = draw(st.sampled_from(["valid", "truncated", "flipped", "magic", "double", "trailing"]))
    if how == "valid":
        return z
    if how == "truncated":
        return z[: draw(st.integers(0, len(z) - 1))]
    if how == "flipped":
        return m_bitflip(z, draw)
    if how == "magic":
        return b"\x1f\x8b\x08\x00" + draw(st.binary(max_size=64))
    if how == "double":
        return gzip.compress(z, mtime=0)
    return z + draw(st.binary(min_size=1, max_size=16))


def m_degenerate(b: bytes, draw: Draw) -> bytes:
    return draw(
        st.sampled_from([b"", b"\n", b" \n\n", b"\x00" * 16, b"{}", b"[]", b"null", b"{}\n"])
    )


MUTATIONS = (
    "truncate",
    "bitflip",
    "bytes",
    "lines",
    "wrong-type",
    "huge-number",
    "nesting",
    "utf8",
    "gzip",
    "degenerate",
)


def mutate(b: bytes, draw: Draw, fmt: Format, target: str) -> tuple[bytes, list[str], bool]:
    """1-3 mutations of ``b``; returns the bytes, the mutations applied, whether gzipped."""
    toml = target.endswith(".toml")
    names = draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3))
    gz = False
    for name in names:
        if name == "truncate":
            b = m_truncate(b, draw)
        elif name == "bitflip":
            b = m_bitflip(b, draw)
        elif name == "bytes":
            b = m_bytes(b, draw)
        elif name == "lines":
            b = m_lines(b, draw)
        elif name == "wrong-type":
            b = m_wrong_type(b, draw, fmt.json_lines, toml)
        elif name == "huge-number":
            b = m_huge(b, draw)
        elif name == "nesting":
            b = m_nesting(b, draw, toml)
        elif name == "utf8":
            b = m_utf8(b, draw)
        elif name == "gzip" and not gz:
            b, gz = m_gzip(b, draw), True
        elif name == "degenerate":
            b = m_degenerate(b, draw)
    return b, names, gz


def simplest(strategy: Any) -> Any:
    """The draw hypothesis shrinks to (the first option, False, 0): a plain command line."""
    return find(strategy, lambda _: True, settings=settings(database=None))


# -- running one input through the CLI ----------------------------------------------------


class Hang(BaseException):
    """Raised by the timer when one input runs past its deadline."""


@contextmanager
def _deadline(seconds: float):
    def ring(signum, frame):
        raise Hang

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    kind: str  # valid | error | traceback | not one line | hang
    code: int | None
    stderr: str
    detail: str = ""  # the traceback, for a failure


@functools.cache
def _click_command() -> Any:
    import typer

    from triage_agent.cli import app as cli

    return typer.main.get_command(cli.app)


def _cli_main() -> None:
    """``triage_agent.cli.app.main`` as the script runs it, over a click command built once
    (typer rebuilds it on every call, about 60 ms: most of an input's cost)."""
    from triage_agent.cli import app as cli

    typer_app, cli.app = cli.app, _click_command()
    try:
        cli.main()
    finally:
        cli.app = typer_app


def classify(code: int | None, stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if code in (0, 1, 3) and "Traceback" not in stderr:
        return "valid"
    errors = [ln for ln in lines if ln.startswith("error:")]
    others = [ln for ln in lines if not ln.startswith(("error:", "warning:"))]
    if code == 2 and len(errors) == 1 and not others:
        return "error"
    return "not one line"


def run_cli(argv: list[str], timeout: float = 30.0, entry: Callable[[], None] = _cli_main):
    """Run ``triage ARGV`` in this process; classify what came out."""
    out, err = _stream("strict"), _stream("backslashreplace")
    saved = sys.argv
    sys.argv = ["triage", *argv]
    try:
        with redirect_stdout(out), redirect_stderr(err), _deadline(timeout):
            entry()
        code: int | None = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Hang:
        return Outcome("hang", None, _text(err), f"past {timeout} s")
    except Exception:  # noqa: BLE001 - this is what the harness counts
        return Outcome("traceback", None, _text(err), traceback.format_exc())
    finally:
        sys.argv = saved
    stderr = _text(err)
    return Outcome(classify(code, stderr), code, stderr)


def _stream(errors: str) -> io.TextIOWrapper:
    """A stream like the script's own: UTF-8 bytes underneath, so text that cannot be
    encoded fails here as it would on a terminal (stdout strict, stderr backslashreplace)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors, write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    return stream.buffer.getvalue().decode("utf-8", "replace")


# -- the fuzz loop ------------------------------------------------------------------------


@dataclass
class Tally:
    fmt: str
    inputs: int = 0
    outcomes: Counter = field(default_factory=Counter)
    mutations: Counter = field(default_factory=Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return self.inputs - self.outcomes["valid"] - self.outcomes["error"]


def _failure_key(detail: str) -> str:
    """The exception type and the innermost project frame: one key per distinct defect."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', detail)
    mine = [f"{Path(f).name}:{n}" for f, n in frames if "triage_agent" in f or "mcp_server" in f]
    last = detail.strip().splitlines()[-1] if detail.strip() else ""
    return f"{last.split(':')[0]} @ {mine[-1] if mine else '?'}"


def fuzz_format(
    name: str,
    seed_dir: Path,
    inputs: int,
    *,
    seed: int = 0,
    scratch: Path | None = None,
    failures: Path | None = None,
    timeout: float = 30.0,
) -> Tally:
    """Run ``inputs`` mutated inputs of one format through the CLI and count the outcomes."""
    fmt = FORMATS[name]
    tally = Tally(name)
    base = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-", dir=scratch or SCRATCH))
    t0 = time.perf_counter()
    serial = itertools.count()

    @settings(
        max_examples=inputs,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hyp_seed(seed)
    @given(st.data())
    def one(data):
        # every draw first: hypothesis may abandon an example mid-draw, and then no file
        # has been written for it
        target = data.draw(st.sampled_from(fmt.targets))
        raw, names, gz = mutate((seed_dir / target).read_bytes(), data.draw, fmt, target)
        work = base / f"in{next(serial)}"
        argv = fmt.argv(work, data.draw)
        shutil.copytree(seed_dir, work)
        path = work / target
        if gz and fmt.gz:
            path.unlink()
            path = path.with_name(path.name + ".gz")
            argv = [str(path) if a == str(work / target) else a for a in argv]
        path.write_bytes(raw)
        res = run_cli(argv, timeout=timeout)
        tally.inputs += 1
        tally.outcomes[res.kind] += 1
        tally.mutations.update(names)
        if res.kind not in ("valid", "error"):
            rec = {
                "kind": res.kind,
                "key": _failure_key(res.detail) if res.detail else res.stderr[:200],
                "argv": argv,
                "target": str(path.relative_to(work)),
                "mutations": names,
                "message": (res.detail or res.stderr).strip().splitlines()[-1][:200],
                "detail": res.detail or res.stderr,
            }
            if failures is not None:
                keep = failures / name / f"{tally.inputs:06d}"
                shutil.copytree(work, keep)
                (keep / "failure.json").write_text(json.dumps(rec, indent=1))
                rec["saved"] = str(keep)
            tally.failures.append(rec)
        shutil.rmtree(work, ignore_errors=True)

    try:
        one()
    finally:
        shutil.rmtree(base, ignore_errors=True)
        tally.seconds = time.perf_counter() - t0
    return tally


def _fuzz_job(args: tuple) -> Tally:
    name, seed_dir, inputs, seed, scratch, failures, timeout = args
    return fuzz_format(
        name,
        seed_dir,
        inputs,
        seed=seed,
        scratch=scratch,
        failures=failures,
        timeout=timeout,
    )


def table(tallies: list[Tally]) -> str:
    def row(t: Tally) -> list[object]:
        o = t.outcomes
        counts = (t.inputs, o["valid"], o["error"], o["traceback"], t.failed - o["traceback"])
        return [t.fmt, *(f"{n:,}" for n in counts), f"{t.seconds:.0f}"]

    head = ("format", "inputs", "valid results", "one-line errors", "tracebacks", "other failures")
    return markdown_table((*head, "s"), map(row, tallies))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inputs", type=int, default=10_000, help="inputs per format")
    ap.add_argument("--formats", default=",".join(FORMATS), help="comma-separated formats")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="formats fuzzed at once")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per input")
    ap.add_argument("--workdir", type=Path, default=SCRATCH / "fuzz_readers")
    ap.add_argument("--failures", type=Path, default=None, help="save failing inputs here")
    a = ap.parse_args(argv)
    names = [n for n in a.formats.split(",") if n]
    unknown = set(names) - set(FORMATS)
    if unknown:
        ap.error(f"unknown format(s) {sorted(unknown)}; one of {', '.join(FORMATS)}")
    seeds = build_seeds(a.workdir / "seeds", names)
    jobs = [(n, seeds[n], a.inputs, a.seed, a.workdir, a.failures, a.timeout) for n in names]
    t0 = time.perf_counter()
    if a.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(a.jobs) as pool:
            tallies = pool.map(_fuzz_job, jobs, chunksize=1)
    else:
        tallies = [_fuzz_job(j) for j in jobs]
    print(table(tallies))
    total = sum(t.inputs for t in tallies)
    tracebacks = sum(t.outcomes["traceback"] for t in tallies)
    failed = sum(t.failed for t in tallies)
    keys = Counter((t.fmt, f["kind"], f["key"]) for t in tallies for f in t.failures)
    example = {(t.fmt, f["kind"], f["key"]): f for t in tallies for f in t.failures}
    for k, n in sorted(keys.items()):
        f = example[k]
        print(f"  {k[0]}: {n} x {k[1]}: {k[2]}  e.g. {f['message'][:120]} {f.get('saved', '')}")
    print(
        f"summary: {total:,} inputs over {len(tallies)} formats in "
        f"{time.perf_counter() - t0:.0f} s; {tracebacks} tracebacks, {failed} failures"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())

"""Accuracy of ``triage run`` on the corpus of real divergence cases (tests/cases/<name>/).

Each case is copied to a temporary directory without its answer (``expected.toml`` and
``answer/`` stay behind), built when it has a ``build.py``, and triaged with the CLI as a
user would: ``triage run --case triage.toml -w WS``. The verdict is read back from
``triage ledger export --format json`` and scored against ``expected.toml``:

- right: the verdict's classification is the expected one, its location is the expected
  one (a file:line within the case's tolerance; the variable, config key, call or state
  named), and no hypothesis at another place is marked supported;
- wrong: a verdict other than unknown at another location or with another classification,
  or any other hypothesis marked supported whose place is not the expected one;
- unknown: no verdict, an ``unknown`` verdict, a verdict without a location, or a
  ``triage run`` that failed.

Wrong is worse than unknown. The last line is exactly
``accuracy: R right, W wrong, U unknown of N cases``.

    python benchmarks/accuracy.py                  # every case (GPU cases need CUDA)
    python benchmarks/accuracy.py --cpu-only
    python benchmarks/accuracy.py --gpu-only      # a case needing more devices is left out, said
    python benchmarks/accuracy.py --cases torch-thread-count,ds-bf16-init-step
    python benchmarks/accuracy.py --root /tmp/heldout      # cases kept outside the corpus
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from cases.corpus import (  # noqa: E402
    CorpusCase,
    Expected,
    devices_needed,
    discover,
    select,
    stage,
)

FILE_LINE = re.compile(r"([\w./-]+\.\w+):(\d+)")
Score = Literal["right", "wrong", "unknown"]


class CaseResult(BaseModel):
    case: str
    expected: str
    verdict: str
    location: str
    validated: str
    score: Score
    why: str
    seconds: float


def _triage(*args: str, cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", "triage_agent.cli.app", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)


def _same_file(found: str, expected: str) -> bool:
    """A found path names the expected one when it ends with the expected path's parts."""
    want = Path(expected).parts
    return Path(found).parts[-len(want) :] == want


def place_matches(exp: Expected, text: str, interventions: list[str]) -> bool:
    """Whether a location text (or a validating intervention) names the expected place."""
    if exp.is_file_line:
        path, line = exp.location.rsplit(":", 1)
        return any(
            _same_file(f, path) and abs(int(n) - int(line)) <= exp.location_tolerance
            for f, n in FILE_LINE.findall(text)
        )
    kind, name = exp.location.split(":", 1)
    if kind == "state":
        words = {"rng": ("rng", "random", "generator")}.get(name, (name,))
        hay = (text + " " + " ".join(interventions)).lower()
        return any(w in hay for w in words) or (name == "rng" and "restore-rng" in interventions)
    if kind == "call":
        name = name.rsplit(":", 1)[-1]
    key = re.escape(name)
    said = re.search(rf"(?<![\w-]){key}(?![\w-])", text) is not None
    touched = any(re.search(rf"(?<![\w-]){key}(?![\w-])", iv) for iv in interventions)
    return said or touched


def _hypothesis_places(state: dict[str, Any], hyp: dict[str, Any]) -> str:
    """What a hypothesis says about where: its statement and its findings' file:lines."""
    spots = [hyp.get("statement", "")]
    for fid in hyp.get("findings", []):
        f = state.get("findings", {}).get(fid)
        if f:
            spots += [f"{f['file']}:{n}" for n in range(f["line_start"], f["line_end"] + 1)]
    return " ".join(spots)


def _validating(state: dict[str, Any], verdict: dict[str, Any]) -> list[str]:
    """The interventions (text forms) of supported reruns in the verdict's evidence chain."""
    chain = set(verdict.get("evidence", []))
    out = []
    for ev in state.get("evidence", []):
        if ev["id"] in chain and ev["kind"] == "rerun" and ev["result"] == "supported":
            data = ev.get("data", {})
            ivs = data.get("interventions") or []
            if data.get("files"):
                ivs = [*ivs, "revert " + ",".join(data["files"])]
            if data.get("policy"):
                ivs = [*ivs, str(data["policy"])]
            out += ivs or ["rerun"]
    return out


def score(exp: Expected, state: dict[str, Any]) -> tuple[Score, str, str, str, str]:
    """(score, why, verdict said, location found, validated by) for one case's ledger."""
    verdict = state.get("verdict") or {}
    klass = verdict.get("classification", "unknown")
    where = verdict.get("location") or ""
    validated = _validating(state, verdict) if verdict else []
    wrong_support = [
        h["id"]
        for h in state.get("hypotheses", {}).values()
        if h.get("status") == "supported"
        and h["id"] != verdict.get("hypothesis")  # the verdict's own is judged below
        and not place_matches(exp, _hypothesis_places(state, h), [])
    ]
    said = (klass, where or "-", ", ".join(validated) or "no")
    if wrong_support:
        return ("wrong", f"hypothesis {wrong_support[0]} supported at another place", *said)
    if klass == "unknown":
        return ("unknown", "no verdict" if not verdict else "verdict unknown", *said)
    if klass != exp.classification:
        return ("wrong", f"classified {klass}, expected {exp.classification}", *said)
    if not where and not validated:
        return ("unknown", "a verdict without a location", *said)
    if not place_matches(exp, where, validated):
        return ("wrong", f"location {where or '-'} is not {exp.location}", *said)
    return ("right", "classification and location", *said)


def run_case(case: CorpusCase, budget_minutes: float, timeout_s: float, keep: bool) -> CaseResult:
    exp = case.expected
    expected = f"{exp.classification} @ {exp.location}" + (
        f" ({exp.outcome})" if exp.failing_run else ""
    )
    tmp = Path(tempfile.mkdtemp(prefix=f"accuracy-{case.name}-"))
    t0 = time.monotonic()
    try:
        toml = stage(case, tmp)
        ws = tmp / "ws"
        common = ("--case", str(toml), "-w", str(ws))
        try:
            done = _triage(
                "run",
                *common,
                "--budget-minutes",
                str(budget_minutes),
                cwd=toml.parent,
                timeout_s=timeout_s,
            )
        except subprocess.TimeoutExpired:
            done = None
        seconds = time.monotonic() - t0
        exported = _triage(
            "ledger", "export", "--format", "json", *common, cwd=toml.parent, timeout_s=120
        )
        if exported.returncode != 0:
            ran = "timed out" if done is None else f"exited {done.returncode}"
            err = (exported.stderr or "").strip().splitlines()[-1:] or [""]
            return CaseResult(
                case=case.name,
                expected=expected,
                verdict="-",
                location="-",
                validated="no",
                score="unknown",
                why=f"triage run {ran}; no ledger: {err[0]}",
                seconds=seconds,
            )
        got, why, said, where, validated = score(exp, json.loads(exported.stdout))
        if done is None or done.returncode != 0:
            why += f" (triage run {'timed out' if done is None else f'exited {done.returncode}'})"
        return CaseResult(
            case=case.name,
            expected=expected,
            verdict=said,
            location=where,
            validated=validated,
            score=got,
            why=why,
            seconds=seconds,
        )
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def table(results: list[CaseResult]) -> Table:
    t = Table(title="triage run on the corpus")
    for col in ("case", "expected", "verdict", "location found", "validated by", "result", "s"):
        t.add_column(col, overflow="fold", justify="right" if col == "s" else "left")
    style = {"right": "green", "wrong": "bold red", "unknown": "yellow"}
    for r in results:
        t.add_row(
            r.case,
            r.expected,
            r.verdict,
            r.location,
            r.validated,
            f"[{style[r.score]}]{r.score}[/] {r.why}",
            f"{r.seconds:.0f}",
        )
    return t


def main(
    cases: Annotated[str, typer.Option(help="comma-separated case names (default: all)")] = "",
    cpu_only: Annotated[bool, typer.Option("--cpu-only", help="leave the GPU cases out")] = False,
    gpu_only: Annotated[bool, typer.Option("--gpu-only", help="only the GPU cases")] = False,
    budget_minutes: Annotated[float, typer.Option(help="triage run --budget-minutes")] = 10.0,
    timeout_s: Annotated[float, typer.Option(help="wall-clock limit of one triage run")] = 1800.0,
    json_out: Annotated[Path | None, typer.Option(help="also write the results as JSON")] = None,
    keep: Annotated[bool, typer.Option(help="keep each case's temporary copy")] = False,
    root: Annotated[
        Path | None, typer.Option(help="a folder of cases other than tests/cases (held out)")
    ] = None,
) -> None:
    console = Console()
    try:
        chosen = select(discover(root) if root else discover(), [n for n in cases.split(",") if n])
    except KeyError as exc:
        console.print(f"error: {exc.args[0]}")
        raise typer.Exit(2) from None
    except ValueError as exc:
        console.print(f"error: a case's expected.toml is malformed: {str(exc).splitlines()[0]}")
        raise typer.Exit(2) from None
    except OSError as exc:
        console.print(f"error: cannot read the cases under {root}: {exc.strerror}")
        raise typer.Exit(2) from None
    if cpu_only or gpu_only:
        chosen = [c for c in chosen if c.expected.gpu == gpu_only]
    gpu = [c.name for c in chosen if c.expected.gpu]
    if gpu and not _has_cuda():
        console.print(
            f"error: {', '.join(gpu)} need CUDA, which this machine lacks: pass --cpu-only"
        )
        raise typer.Exit(2)
    have = _cuda_devices() if gpu else 0
    short = [c for c in chosen if c.expected.gpu and devices_needed(c) > have]
    for c in short:
        console.print(f"left out: {c.name} needs {devices_needed(c)} CUDA devices, {have} here")
    chosen = [c for c in chosen if c not in short]
    if not chosen:
        console.print("error: no case selected")
        raise typer.Exit(2)
    results: list[CaseResult] = []
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("cases", total=len(chosen))
        for case in chosen:
            progress.update(task, description=f"triage run {case.name}")
            results.append(run_case(case, budget_minutes, timeout_s, keep))
            progress.advance(task)
    console.print(table(results))
    if json_out is not None:
        json_out.write_text(json.dumps([r.model_dump() for r in results], indent=2) + "\n")
    n = {s: sum(r.score == s for r in results) for s in ("right", "wrong", "unknown")}
    print(
        f"accuracy: {n['right']} right, {n['wrong']} wrong, {n['unknown']} unknown "
        f"of {len(results)} cases"
    )


def _cuda_devices() -> int:
    import torch

    return torch.cuda.device_count()


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:  # pragma: no cover - torch is a dependency
        return False


if __name__ == "__main__":
    typer.run(main)

"""The corpus of divergence cases: each ``tests/cases/<name>/`` holds a ``triage.toml`` (the
case as a user writes it), its code, and ``expected.toml`` (the answer).

Only the corpus test and ``benchmarks/accuracy.py`` read ``expected.toml``; the workflow
never does. A case's ``answer/`` directory holds code only the ground truth uses (a fixed
function an intervention routes calls to); like ``expected.toml`` it is left out of the
copy a benchmark runs. A case whose directory holds ``build.py`` is built before it runs:
the script creates what cannot be stored as plain files (a git repository with its history)
in the directory it runs in.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CASES_DIR = Path(__file__).resolve().parent
BUILD_SCRIPT = "build.py"
ANSWER_FILES = ("expected.toml", "answer")
_LOCATION = re.compile(r"^(env|config|call|state):\S.*$|^[\w./-]+\.\w+:\d+$")


class Expected(BaseModel):
    """The answer of one case (``[expected]`` in ``expected.toml``)."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(min_length=1)
    first_divergence_step: int = Field(ge=0)
    first_divergence_event: str = ""
    location: str
    location_tolerance: int = Field(default=0, ge=0)
    classification: Literal["bug", "policy-difference", "environment", "unknown"]
    intervention: str = Field(min_length=1)
    run: Literal["a", "b", "both"] = "b"
    gpu: bool = False
    ci: bool = False
    outcome: Literal["diverges", "crash-a", "crash-b", "hang-a", "hang-b"] = "diverges"
    notes: str = Field(min_length=40)

    @field_validator("location")
    @classmethod
    def _location_form(cls, v: str) -> str:
        if not _LOCATION.match(v):
            raise ValueError(
                "location must be file:line, env:VAR, config:key, call:pkg.mod:Qual or state:name"
            )
        return v

    @model_validator(mode="after")
    def _tolerance_for_lines(self) -> Expected:
        if self.location_tolerance and not self.is_file_line:
            raise ValueError("location_tolerance applies to a file:line location only")
        return self

    @property
    def is_file_line(self) -> bool:
        return self.location.split(":", 1)[0] not in ("env", "config", "call", "state")

    @property
    def failing_run(self) -> str | None:
        """The run expected to crash or hang, or None when both complete."""
        return None if self.outcome == "diverges" else self.outcome.rsplit("-", 1)[1]


class CorpusCase(BaseModel):
    name: str
    dir: Path
    expected: Expected

    @property
    def builds(self) -> bool:
        return (self.dir / BUILD_SCRIPT).is_file()


DEVICE_FLAGS = ("--nproc-per-node", "--nproc_per_node", "--num_gpus")


def devices_needed(case: CorpusCase) -> int:
    """The most processes one launch of the case starts (one CUDA device each)."""
    raw = tomllib.loads((case.dir / "triage.toml").read_text(encoding="utf-8"))
    counts = [1]
    for run in raw.get("runs", {}).values():
        for argv in run.get("launch", []):
            for flag in DEVICE_FLAGS:
                if flag in argv[:-1]:
                    counts.append(int(argv[argv.index(flag) + 1]))
    return max(counts)


def load_expected(path: Path) -> Expected:
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    if set(raw) != {"expected"}:
        raise ValueError(f"{path}: expected exactly one table, [expected]")
    return Expected.model_validate(raw["expected"])


def discover(root: Path = CASES_DIR) -> list[CorpusCase]:
    """Every case directory under ``root`` (one holding ``expected.toml``), by name."""
    return [
        CorpusCase(name=d.name, dir=d, expected=load_expected(d / "expected.toml"))
        for d in sorted(root.iterdir())
        if (d / "expected.toml").is_file()
    ]


def select(cases: list[CorpusCase], names: list[str] | None = None) -> list[CorpusCase]:
    if not names:
        return cases
    known = {c.name: c for c in cases}
    missing = [n for n in names if n not in known]
    if missing:
        raise KeyError(f"no case named {missing[0]!r}; known: {', '.join(sorted(known))}")
    return [known[n] for n in names]


def stage(
    case: CorpusCase, dest: Path, *, with_answer: bool = False, timeout_s: float = 120.0
) -> Path:
    """Copy the case into ``dest/<name>`` (its own workspace left behind, and the answer
    unless ``with_answer``), build it, and return the path of the copy's ``triage.toml``."""
    target = Path(dest) / case.name
    skip = (".triage", "__pycache__", *(() if with_answer else ANSWER_FILES))
    shutil.copytree(case.dir, target, ignore=shutil.ignore_patterns(*skip))
    if case.builds:
        done = subprocess.run(
            [sys.executable, BUILD_SCRIPT],
            cwd=target,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise RuntimeError(f"{case.name}: {BUILD_SCRIPT} exited {done.returncode}: {last[0]}")
    return target / "triage.toml"

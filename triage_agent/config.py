"""Case configuration: ``triage.toml`` in the working directory, validated, flags override.

Layout::

    [case]
    name = "resume-vs-uninterrupted"
    mismatch_step = 37            # optional: detected from the metric fingerprints
    workspace = ".triage"
    source_roots = ["src"]        # where scans and MCP path arguments may point
    scan_paths = ["src/trainlib"]

    [runs.a]                      # the reference run
    metrics = "runs/a"            # a MetricLog file or a directory of them
    launch = [["python", "train.py", "--out", "runs/a"]]
    [runs.a.source]
    repo = "."
    rev = "main"

    [runs.b]                      # the suspect run
    ...

Relative paths are resolved against the directory holding the file.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import ConfigError
from .records import Case

CONFIG_NAME = "triage.toml"


def _fmt_loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _case_dict(raw: dict[str, Any]) -> dict[str, Any]:
    unknown = set(raw) - {"case", "runs"}
    if unknown:
        raise ConfigError(
            f"unknown table(s) {sorted(unknown)} in {CONFIG_NAME}: expected [case] and [runs.a]/[runs.b]"
        )
    case = raw.get("case", {})
    if not isinstance(case, dict):
        raise ConfigError(f"{CONFIG_NAME}: 'case' must be a table, [case]")
    case = dict(case)
    runs = raw.get("runs", {})
    if not isinstance(runs, dict) or set(runs) != {"a", "b"}:
        raise ConfigError(f"{CONFIG_NAME}: expected exactly two runs, [runs.a] and [runs.b]")
    for key in ("a", "b"):
        if not isinstance(runs[key], dict):
            raise ConfigError(f"{CONFIG_NAME}: 'runs.{key}' must be a table, [runs.{key}]")
        run = dict(runs[key])
        run.setdefault("name", key)
        case[f"run_{key}"] = run
    return case


def _resolve_paths(case: Case, base: Path) -> Case:
    def rel(p: str | None) -> str | None:
        if p is None:
            return None
        if p.startswith("{out}"):  # filled in per relaunch (see triage_agent.runs)
            return p
        try:
            q = Path(p).expanduser()
            return str(q if q.is_absolute() else (base / q).resolve())
        except (RuntimeError, ValueError, OSError) as exc:  # ~nosuchuser, a NUL byte, ELOOP
            raise ConfigError(f"invalid path {p[:80]!r}: {exc}") from None

    for run in (case.run_a, case.run_b):
        run.metrics = rel(run.metrics)
        run.trace_dir = rel(run.trace_dir)
        run.cwd = rel(run.cwd) or str(base)
        if run.source is not None:
            run.source.repo = rel(run.source.repo) or str(base)
    case.workspace = rel(case.workspace) or str(base / ".triage")
    case.source_roots = [rel(p) for p in case.source_roots] or [str(base)]
    case.scan_paths = [rel(p) for p in case.scan_paths]
    roots = [Path(r) for r in case.source_roots]
    for sp in case.scan_paths:
        if not any(Path(sp).is_relative_to(r) for r in roots):
            raise ConfigError(
                f"{CONFIG_NAME}: scan path {sp} is outside every source root "
                f"({', '.join(map(str, roots))}): add its root to case.source_roots"
            )
    case.correspondence_map = rel(case.correspondence_map)
    return case


def case_from_dict(raw: dict[str, Any], base: Path, origin: str = CONFIG_NAME) -> Case:
    try:
        case = Case.model_validate(_case_dict(raw))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = _fmt_loc(err["loc"])
        if loc.startswith(("run_a", "run_b")):
            loc = loc.replace("run_a", "runs.a", 1).replace("run_b", "runs.b", 1)
        else:
            loc = f"case.{loc}"
        raise ConfigError(f"{origin}: key '{loc}': {err['msg']}") from None
    return _resolve_paths(case, base)


def load_case(path: str | Path | None = None, **overrides: Any) -> Case | None:
    """Load ``triage.toml`` (or ``path``); None when no file exists and none was named."""
    p = Path(path) if path else Path.cwd() / CONFIG_NAME
    if not p.exists():
        if path:
            raise ConfigError(f"case file {p} does not exist")
        return None
    if not p.is_file():
        raise ConfigError(f"case file {p} is not a regular file: pass the path of a triage.toml")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start}): a case file is TOML") from None
    except OSError as exc:
        raise ConfigError(f"cannot read case file {p}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{p}: not valid TOML: arrays or tables nested too deeply") from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise ConfigError(f"{p}: not valid TOML: {str(exc).splitlines()[0]}") from None
    case = case_from_dict(raw, p.resolve().parent, origin=str(p))
    clean = {k: v for k, v in overrides.items() if v is not None}
    if clean:
        try:
            case = Case.model_validate({**case.model_dump(), **clean})
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ConfigError(
                f"option --{_fmt_loc(err['loc']).replace('_', '-')}: {err['msg']}"
            ) from None
    return case

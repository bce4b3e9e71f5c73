"""Materialise the runs of a case: launch their commands (argv lists), cached in the workspace.

Every relaunch - the untraced baseline, a traced window, a policy rerun - goes through
:func:`materialize`, which runs the run's launch commands in order, each through the
capture injector (level "none" when nothing is traced, so policies still apply), with a
timeout that kills the whole process group. ``{out}`` in an argument is replaced by the
relaunch's own output directory, so no relaunch overwrites another's files. A run made of
several commands (train, save, resume in a fresh process) is traced per command and its
per-rank trace files are joined into one stream per rank.

Results are cached by a key over the commands, environment, policies, capture settings and
the content of every file an argument names, so a second `triage run` reuses baselines.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from .errors import InputError
from .records import RunSpec
from .trace_format import TRACE_GLOB

OUT_TOKEN = "{out}"


class RunOutcome(BaseModel):
    run: str
    label: str
    out_dir: str
    metrics: str | None
    trace_dir: str | None = None
    argv: list[list[str]]
    exit_codes: list[int] = Field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    policies: list[str] = Field(default_factory=list)
    logs: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.exit_codes) and all(c == 0 for c in self.exit_codes)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expand(argv: list[str], out: Path, port: int | None = None) -> list[str]:
    """Replace the case tokens: {out}, {python}, {bin}, and {port} (a free TCP port per command,
    so two relaunches can run side by side)."""
    bindir = str(Path(sys.executable).parent)
    port_s = str(port if port is not None else free_port())
    return [
        a.replace(OUT_TOKEN, str(out))
        .replace("{python}", sys.executable)
        .replace("{bin}", bindir)
        .replace("{port}", port_s)
        for a in argv
    ]


def require_relaunchable(run: RunSpec) -> None:
    if not run.launch:
        raise InputError(f"run {run.name!r} has no launch commands: set runs.<name>.launch in the case")
    if not any(OUT_TOKEN in a for argv in run.launch for a in argv):
        raise InputError(
            f"run {run.name!r}: its launch commands must write under '{{out}}' "
            "(for example --out {out}) so a relaunch never overwrites the original outputs"
        )
    if run.metrics is None or OUT_TOKEN not in run.metrics:
        raise InputError(
            f"run {run.name!r}: metrics must point under '{{out}}' (for example metrics = \"{{out}}\")"
        )


def _content_hash(run: RunSpec) -> str:
    h = hashlib.sha256()
    # Where the case lives is not part of the key; what its named files hold is.
    h.update(json.dumps(run.model_dump(mode="json", exclude={"cwd"}), sort_keys=True).encode())
    cwd = Path(run.cwd or ".")
    for argv in run.launch:
        for a in argv:
            p = cwd / a
            if OUT_TOKEN not in a and len(a) < 4096 and p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()


def run_key(run: RunSpec, policies: list[str], capture: BaseModel | None) -> str:
    h = hashlib.sha256(_content_hash(run).encode())
    h.update(json.dumps(sorted(policies)).encode())
    if capture is not None:
        h.update(capture.model_dump_json(exclude={"out_dir", "run_id"}).encode())
    return h.hexdigest()[:12]


def join_trace_segments(segments: list[Path], out: Path) -> list[Path]:
    """Join per-command trace files into one stream per rank (header of the first segment)."""
    by_rank: dict[str, list[Path]] = {}
    for seg in segments:
        for f in sorted(seg.glob(TRACE_GLOB)):
            by_rank.setdefault(f.name, []).append(f)
    written: list[Path] = []
    for name, files in sorted(by_rank.items()):
        seq = 0
        steps: list[int] = []
        status = "ok"
        dest = out / name
        with open(dest, "w") as w:
            for i, f in enumerate(files):
                for line in f.read_text().splitlines():
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        status = "error"  # a torn last line of a crashed command: stop there
                        break
                    kind = rec.get("type")
                    if kind == "header":
                        if i == 0:
                            w.write(line + "\n")
                        continue
                    if kind == "end":
                        steps += rec.get("steps", [])
                        status = status if rec.get("status") == "ok" else "error"
                        continue
                    if kind == "event":
                        rec["seq"] = seq
                        seq += 1
                        rec.setdefault("meta", {})["segment"] = i
                        line = json.dumps(rec, separators=(",", ":"))
                    w.write(line + "\n")
            end = {"type": "end", "status": status, "steps": sorted(set(steps)), "note": f"joined {len(files)} segment(s)"}
            w.write(json.dumps(end) + "\n")
        written.append(dest)
    return written


def materialize(
    run: RunSpec,
    workspace: Path,
    label: str,
    *,
    capture: BaseModel | None = None,
    policies: list[str] | None = None,
    timeout_s: float = 600.0,
    reuse: bool = True,
    progress: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Launch ``run`` into ``workspace/runs/<name>/<label>-<key>``; reuse a finished one."""
    from .fingerprint import CaptureConfig, capture_command

    require_relaunchable(run)
    pols = list(policies or [])
    key = run_key(run, pols, capture)
    out = (workspace / "runs" / run.name / f"{label}-{key}").resolve()
    done = out / "outcome.json"
    if reuse and done.exists():
        cached = RunOutcome.model_validate_json(done.read_text())
        if cached.ok:
            return cached.model_copy(update={"cached": True})
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **run.env}
    argvs = [expand(a, out) for a in run.launch]
    outcome = RunOutcome(
        run=run.name,
        label=label,
        out_dir=str(out),
        metrics=run.metrics.replace(OUT_TOKEN, str(out)) if run.metrics else None,
        argv=argvs,
        policies=pols,
    )
    t0 = time.monotonic()
    segments: list[Path] = []
    for k, argv in enumerate(argvs):
        if progress:
            progress(f"{run.name}/{label}: command {k + 1}/{len(argvs)}")
        seg = out / "trace" / f"seg{k}"
        update = {"out_dir": seg, "run_id": f"{run.name}-{label}", "policies": pols}
        cfg = (
            capture.model_copy(update=update)
            if capture is not None
            else CaptureConfig(level="none", **update)
        )
        res = capture_command(
            argv, cfg, cwd=run.cwd, env=env, timeout_s=timeout_s, log_dir=out / "logs" / f"seg{k}"
        )
        outcome.exit_codes.append(124 if res.timed_out or res.exit_code is None else res.exit_code)
        outcome.logs += [p for p in (res.stdout_log, res.stderr_log) if p]
        outcome.warnings += res.warnings
        segments.append(seg)
        if res.exit_code != 0:
            break
    outcome.seconds = time.monotonic() - t0
    if capture is not None and getattr(capture, "level", "none") != "none":
        tdir = out / "trace"
        join_trace_segments(segments, tdir)
        outcome.trace_dir = str(tdir)
    done.write_text(outcome.model_dump_json(indent=2))
    return outcome

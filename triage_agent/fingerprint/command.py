"""Run an unmodified training command with the tracer injected into every process.

``capture_command`` checks the out dir, writes the config file, prepends the injection
directory to ``PYTHONPATH`` (when it has something to do: :func:`injects`), runs the command through :func:`triage_agent.process.run_process`
(argv list, own process group, timeout; every process of the command has ended before
anything is read), and then reads back what the ranks wrote: trace files with their sha256, steps seen and
traced, and a warning when the step window never occurred. The command's exit code is
passed through; a failed or killed command keeps its partial trace (every completed step).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import BaseModel, Field

from ..errors import InputError
from ..policies import PATCHES_ENV
from ..process import ProcessResult, run_process
from ..trace_format import TRACE_GLOB
from .config import CONFIG_ENV, CaptureConfig
from .inject import INJECT_DIR
from .sink import CaptureStatus

CONFIG_NAME = "capture_config.json"


class TraceFileInfo(BaseModel):
    path: str
    sha256: str
    bytes: int
    rank: int | None = None
    steps: list[int] = Field(default_factory=list, description="steps with a step_end line")
    events: int = 0
    complete: bool = Field(default=False, description="ends with an 'end' record")
    torn_tail: bool = Field(default=False, description="last line cut short (a killed rank)")


class CaptureResult(BaseModel):
    argv: list[str]
    exit_code: int | None = Field(description="the command's exit code; None when it timed out")
    timed_out: bool = False
    duration_s: float
    out_dir: str
    config_path: str
    files: list[TraceFileInfo] = Field(default_factory=list)
    steps_seen: list[int] = Field(default_factory=list, description="every step any rank began")
    steps_traced: list[int] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    stdout_log: str | None = None
    stderr_log: str | None = None
    housekeeping: list[str] = Field(
        default_factory=list, description="what dead jobs left that was removed around the run"
    )
    process: ProcessResult | None = Field(
        default=None, description="what ran: program, cwd, environment digest, host, pid, start"
    )


def check_out_dir(out_dir: Path) -> Path:
    """Create ``out_dir`` and prove it is writable, before anything is launched."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(f"trace out dir {out_dir} is not writable: {exc.strerror}") from None
    return out_dir.resolve()


def summarize_trace(path: Path) -> TraceFileInfo:
    data = path.read_bytes()
    info = TraceFileInfo(path=str(path), sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    lines = data.decode("utf-8", errors="replace").split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if i >= len(lines) - 2:
                info.torn_tail = True
                continue
            raise InputError(f"{path}:{i + 1}: malformed trace line") from None
        kind = rec.get("type")
        if kind == "header":
            info.rank = rec.get("rank")
        elif kind == "step_end":
            info.steps.append(rec["step"])
            info.events += rec.get("events", 0)
        elif kind == "end":
            info.complete = True
    return info


def _fmt_steps(steps: list[int]) -> str:
    if not steps:
        return "none"
    return f"{steps[0]}-{steps[-1]}" if len(steps) > 1 else str(steps[0])


def collect(config: CaptureConfig) -> tuple[list[TraceFileInfo], list[int], list[int], list[str]]:
    out = Path(config.out_dir)
    files = [summarize_trace(p) for p in sorted(out.glob(TRACE_GLOB))]
    files += [summarize_trace(p) for p in sorted(out.glob("part*/" + TRACE_GLOB))]
    seen: set[int] = set()
    for st in [*out.glob("capture_rank*.json"), *out.glob("part*/capture_rank*.json")]:
        seen.update(CaptureStatus.model_validate_json(st.read_text()).steps_seen)
    traced = sorted({s for f in files for s in f.steps})
    seen.update(traced)
    warnings: list[str] = []
    if any(p.parent != out for p in map(lambda f: Path(f.path), files)):
        warnings.append("several processes traced the same rank (a resumed run): see part*/")
    if config.level != "none" and config.steps is not None:
        a, b = config.steps
        missing = [s for s in range(a, b + 1) if s not in traced]
        if len(missing) == b - a + 1:
            warnings.append(
                f"step range {a}-{b} never occurred: the run saw steps {_fmt_steps(sorted(seen))}"
            )
        elif missing:
            warnings.append(f"steps {missing} of the window {a}-{b} were not traced on any rank")
    for f in files:
        if not f.complete:
            warnings.append(
                f"{f.path}: no end record (the rank stopped early); completed steps kept"
            )
    if config.dump and files and not any(out.glob("**/dumps/rank*/*.pt")):
        warnings.append(
            f"no event matched --dump {', '.join(config.dump)}: patterns match whole names "
            "(aten::addmm, not addmm) or scope:name; * and ? are wildcards"
        )
    if not files and config.level != "none":
        warnings.append(
            "no process wrote a trace: no Python process of the command ran torch through "
            "a traced step"
            + (f" on ranks {config.ranks}" if config.ranks is not None else "")
            + "; see the command's logs in the out dir"
        )
    return files, sorted(seen), traced, warnings


def injects(config: CaptureConfig, env: dict[str, str]) -> bool:
    """Whether the injected bootstrap has anything to do in the command's processes.

    An untraced launch with no policy and no function patch (a baseline, a state capture
    whose own hook stands on ``PYTHONPATH``) runs without it: the bootstrap imports the
    tracer, hence torch, in every Python process at start-up, helpers included
    (DeepSpeed's JIT op check runs ``py-cpuinfo`` as a subprocess of each rank, twice),
    and that was a second or two of CPU per helper process for nothing. Without our
    ``sitecustomize`` first on the path, Python runs the one it would have chained to.
    """
    return config.level != "none" or bool(config.policies) or bool(env.get(PATCHES_ENV))


def capture_command(
    argv: list[str],
    config: CaptureConfig,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
    log_dir: str | os.PathLike[str] | None = None,
) -> CaptureResult:
    if not argv or not all(isinstance(a, str) and a for a in argv):
        raise InputError("no command to trace: give it after '--', e.g. -- python train.py")
    if timeout_s is not None and not 0 < timeout_s <= 7 * 24 * 3600:
        raise InputError(f"--timeout must be between 0 and 604800 s, got {timeout_s}")
    out = check_out_dir(Path(config.out_dir))
    earlier = [*out.glob(TRACE_GLOB), *out.glob("part*/" + TRACE_GLOB)]
    if earlier:
        # a second capture here would mix with the first (its files look like a resumed run)
        raise InputError(
            f"trace out dir {out} already holds a trace ({len(earlier)} file(s)): "
            "give a new --out, or remove that directory first"
        )
    config = config.model_copy(update={"out_dir": out})
    cfg_path = out / CONFIG_NAME
    cfg_path.write_text(config.model_dump_json(indent=1))
    run_env = dict(os.environ if env is None else env)
    if injects(config, run_env):
        pp = run_env.get("PYTHONPATH", "")
        run_env["PYTHONPATH"] = str(INJECT_DIR) + (os.pathsep + pp if pp else "")
    run_env[CONFIG_ENV] = str(cfg_path)
    logs = Path(log_dir) if log_dir is not None else out
    logs.mkdir(parents=True, exist_ok=True)
    res = run_process(
        list(argv),
        cwd=cwd if cwd is not None else os.getcwd(),
        env=run_env,
        timeout_s=timeout_s,
        stdout_path=logs / "command.stdout.log",
        stderr_path=logs / "command.stderr.log",
    )
    files, seen, traced, warnings = collect(config)
    warnings += res.warnings
    if res.timed_out:
        warnings.insert(0, f"the command ran past {timeout_s}s and was killed; partial trace kept")
    elif res.returncode:
        warnings.insert(0, f"the command exited with code {res.returncode}; partial trace kept")
    return CaptureResult(
        argv=list(argv),
        exit_code=res.returncode,
        timed_out=res.timed_out,
        duration_s=res.duration_s,
        out_dir=str(out),
        config_path=str(cfg_path),
        files=files,
        steps_seen=seen,
        steps_traced=traced,
        warnings=warnings,
        stdout_log=res.stdout_path,
        stderr_log=res.stderr_path,
        housekeeping=res.housekeeping,
        process=res,
    )

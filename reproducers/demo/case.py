"""The embedded demo case: write it out, and produce its runs' metric fingerprints.

``write_demo_case(dest)`` writes ``train.py`` (a tiny GPT trained with DeepSpeed ZeRO-1 on
two CPU ranks) and a ``triage.toml`` whose run A trains steps 0..40 in one process and
whose run B trains 0..36, checkpoints, and continues in a fresh process. Launch arguments
use the case tokens of :class:`triage_agent.records.RunSpec`: ``{out}`` is a fresh output
directory per launch, ``{bin}`` the bin directory of the interpreter running triage, so
the DeepSpeed launcher of the same environment is used even when that directory is not
on ``PATH``.

``materialize(case, progress)`` runs each run's launch commands (argv lists, in order, with
a timeout that ends the whole process group) and caches the outputs in the case's
workspace under a key over the commands, the environment overrides, the content of every
file an argument names (``train.py``), the source revision and the torch/DeepSpeed
versions, so a second call reuses them. Limits: a launch that writes outside ``{out}`` is
not isolated by the cache; the key does not cover files imported indirectly (a library
the script imports is covered by its version or its git revision only).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, Field

from triage_agent.errors import InputError, TriageError
from triage_agent.records import Case, RunSpec

DEMO_DIR = Path(__file__).resolve().parent
TRAIN_SCRIPT = "train.py"
OUT_TOKEN = "{out}"
CACHE_DIR = "materialized"
MATERIALIZE_VERSION = 1

Progress = Callable[[str], None]


class LaunchError(TriageError):
    """A launch command of a case failed or ran past its timeout."""


def _train(*args: str) -> list[str]:
    return [
        "{bin}/deepspeed",
        "--num_gpus",
        "2",
        "--master_port",
        "{port}",
        TRAIN_SCRIPT,
        "--out",
        OUT_TOKEN,
        *args,
    ]


def demo_toml() -> str:
    """The demo's ``triage.toml``: facts about the two runs, nothing about the answer."""
    run_a = [_train("--steps-from", "0", "--steps-to", "40")]
    run_b = [
        _train("--steps-from", "0", "--steps-to", "36", "--save-at", "36", "--ckpt", "{out}/ckpt"),
        _train("--steps-from", "37", "--steps-to", "40", "--resume-from", "{out}/ckpt"),
    ]

    def argvs(cmds: list[list[str]]) -> str:
        return "[\n" + "".join(f"  {json.dumps(c)},\n" for c in cmds) + "]"

    return (
        "# A tiny GPT-style model, DeepSpeed ZeRO stage 1, AdamW, two CPU ranks on gloo.\n"
        "# Run A trains steps 0..40 in one process. Run B trains steps 0..36, saves a\n"
        "# DeepSpeed checkpoint, and a new process loads it and trains steps 37..40.\n"
        "[case]\n"
        'name = "demo-resume"\n'
        'description = "uninterrupted run (A) vs checkpoint at step 36 and resume (B)"\n'
        'workspace = ".triage"\n'
        'source_roots = ["."]\n'
        f'scan_paths = ["{TRAIN_SCRIPT}"]\n'
        "timeout_s = 300.0\n"
        "\n[runs.a]\n"
        'metrics = "{out}"\n'
        f"launch = {argvs(run_a)}\n"
        "\n[runs.b]\n"
        'metrics = "{out}"\n'
        f"launch = {argvs(run_b)}\n"
    )


def write_demo_case(dest: Path, *, overwrite: bool = False) -> Path:
    """Write ``train.py`` and ``triage.toml`` into ``dest``; return the ``triage.toml`` path.

    Idempotent: files already holding the same bytes are left alone. A file with other
    content (an edited case) is kept and an InputError raised unless ``overwrite``.
    """
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise InputError(
            f"{dest} exists and is not a directory: give a directory for the demo case"
        )
    files = {
        TRAIN_SCRIPT: (DEMO_DIR / TRAIN_SCRIPT).read_bytes(),
        "triage.toml": demo_toml().encode(),
    }
    clash = [
        n for n, data in files.items() if (dest / n).exists() and (dest / n).read_bytes() != data
    ]
    if clash and not overwrite:
        raise InputError(
            f"{dest} already holds a different {', '.join(clash)}: "
            "remove it or write the demo case with overwrite"
        )
    dest.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        target = dest / name
        if not target.exists() or target.read_bytes() != data:
            tmp = target.with_name(f".{name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
    return dest / "triage.toml"


class CommandResult(BaseModel):
    argv: list[str] = Field(description="the argv actually executed, tokens expanded")
    exit_code: int
    seconds: float
    log: str = Field(description="stdout and stderr of the command, merged")
    timed_out: bool = False


class RunMaterialization(BaseModel):
    run: str
    key: str = Field(description="cache key over commands, env, named files, source, versions")
    out_dir: str
    metrics: str = Field(description="metric fingerprint file or directory this run produced")
    commands: list[CommandResult] = Field(default_factory=list)
    seconds: float = Field(description="wall time of all launch commands when first produced")
    cached: bool = False


class CaseMaterialization(BaseModel):
    runs: dict[str, RunMaterialization]


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for dist in ("torch", "deepspeed"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _source_rev(run: RunSpec) -> str | None:
    """The commit a run's source pins, so a moved branch invalidates the cache."""
    if run.source is None or run.source.rev is None:
        return None
    import git

    try:
        return git.Repo(run.source.repo).commit(run.source.rev).hexsha
    except (git.GitError, ValueError) as exc:
        raise InputError(
            f"run {run.name!r}: cannot resolve revision {run.source.rev!r} in {run.source.repo}: {exc}"
        ) from None


def run_cache_key(run: RunSpec) -> str:
    """Hash of what decides a run's outputs, as far as a launcher can see it."""
    h = hashlib.sha256()
    spec = {
        "v": MATERIALIZE_VERSION,
        "launch": run.launch,
        "env": run.env,
        "metrics": _metrics_suffix(run),
        "source_rev": _source_rev(run),
        "versions": _versions(),
    }
    h.update(json.dumps(spec, sort_keys=True).encode())
    cwd = Path(run.cwd or ".")
    for argv in run.launch:
        for arg in argv:
            if OUT_TOKEN in arg or "{" in arg or len(arg) > 1024:
                continue
            p = cwd / arg
            if p.is_file():
                h.update(arg.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _metrics_suffix(run: RunSpec) -> str:
    """The metrics path below ``{out}``; config loading may have made it absolute already."""
    if not run.metrics or OUT_TOKEN not in run.metrics:
        raise InputError(
            f"run {run.name!r}: metrics must point under '{{out}}' (for example metrics = \"{{out}}\")"
        )
    return run.metrics.split(OUT_TOKEN, 1)[1].lstrip("/")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expand(argv: list[str], out: Path) -> list[str]:
    """Replace the case tokens ({out}, {python}, {bin}, {port}: a free TCP port per command).

    A DeepSpeed launch that names no port at all gets a free one too: the launcher's
    default (29500) is shared by every job on the host, and DeepSpeed's CPU all-reduce
    names its shared-memory buffers after MASTER_ADDR and MASTER_PORT, so two jobs on the
    default port meet in the same buffers and hang.
    """
    bindir = str(Path(sys.executable).parent)
    port = str(_free_port())
    args = [
        a.replace(OUT_TOKEN, str(out))
        .replace("{python}", sys.executable)
        .replace("{bin}", bindir)
        .replace("{port}", port)
        for a in argv
    ]
    if (
        args
        and Path(args[0]).name == "deepspeed"
        and not any(a.startswith("--master_port") for a in args)
    ):
        args.insert(1, f"--master_port={port}")
    return args


def _run_command(
    argv: list[str], cwd: str | None, env: dict[str, str], timeout_s: float, log: Path
) -> CommandResult:
    exe = shutil.which(argv[0], path=env.get("PATH"))
    if exe is None and not Path(argv[0]).is_file():
        raise LaunchError(f"launch command {argv[0]!r} not found (looked on PATH and as a path)")
    t0 = time.monotonic()
    timed_out = False
    with open(log, "wb") as fh:
        # a new session, so a timeout can end the launcher and every rank it spawned
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
    return CommandResult(
        argv=argv, exit_code=code, seconds=time.monotonic() - t0, log=str(log), timed_out=timed_out
    )


def _last_error_line(log: Path) -> str:
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error:" in ln:
            return ln[:200]
    return lines[-1][:200] if lines else "(no output)"


def materialize_run(
    run: RunSpec, workspace: Path, timeout_s: float, progress: Progress | None = None
) -> RunMaterialization:
    """Produce one run's outputs under ``workspace/materialized/<run>-<key>``, or reuse them."""
    if not run.launch:
        raise InputError(f"run {run.name!r} has no launch commands: set runs.{run.name}.launch")
    if run.cwd is not None and not Path(run.cwd).is_dir():
        raise InputError(f"run {run.name!r}: working directory {run.cwd} does not exist")
    say = progress or (lambda _msg: None)
    key = run_cache_key(run)
    out = (Path(workspace) / CACHE_DIR / f"{run.name}-{key}").resolve()
    done = out / "materialized.json"
    if done.exists():
        try:
            prev = RunMaterialization.model_validate_json(done.read_text())
        except ValueError:
            prev = None  # unreadable marker: produce the run again rather than trust it
        if prev is not None and Path(prev.metrics).exists():
            say(f"run {run.name}: reusing outputs {out.name}")
            return prev.model_copy(update={"cached": True})
    staging = out.with_name(f".staging-{out.name}")
    if staging.exists():
        shutil.rmtree(staging)
    (staging / "logs").mkdir(parents=True)
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, **run.env}
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    results: list[CommandResult] = []
    t0 = time.monotonic()
    for k, raw in enumerate(run.launch):
        say(f"run {run.name}: command {k + 1}/{len(run.launch)}: {' '.join(raw[:4])} ...")
        log = staging / "logs" / f"cmd{k}.log"
        res = _run_command(expand(raw, staging), run.cwd, env, timeout_s, log)
        results.append(res)
        if res.timed_out:
            raise LaunchError(
                f"run {run.name!r} command {k + 1} ran past {timeout_s:.0f}s and was ended; log: {log}"
            )
        if res.exit_code != 0:
            raise LaunchError(
                f"run {run.name!r} command {k + 1} exited {res.exit_code}: "
                f"{_last_error_line(log)} (log: {log})"
            )
    seconds = time.monotonic() - t0
    if out.exists():
        shutil.rmtree(out)
    os.replace(staging, out)
    metrics = out / _metrics_suffix(run)
    if not metrics.exists():
        raise LaunchError(f"run {run.name!r} finished but wrote no metrics at {metrics}")
    # recorded with the final directory, so the commands can be rerun as written
    fixed = [
        r.model_copy(
            update={
                "argv": [a.replace(str(staging), str(out)) for a in r.argv],
                "log": r.log.replace(str(staging), str(out)),
            }
        )
        for r in results
    ]
    rec = RunMaterialization(
        run=run.name,
        key=key,
        out_dir=str(out),
        metrics=str(metrics),
        commands=fixed,
        seconds=seconds,
    )
    tmp = done.with_name(".materialized.json.tmp")
    tmp.write_text(rec.model_dump_json(indent=2))
    os.replace(tmp, done)  # written last: its presence means the outputs are complete
    say(f"run {run.name}: done in {seconds:.1f}s")
    return rec


def materialize(case: Case, progress: Progress | None = None) -> CaseMaterialization:
    """Produce (or reuse) the metric fingerprints of both runs of ``case``."""
    workspace = Path(case.workspace)
    return CaseMaterialization(
        runs={
            run.name: materialize_run(run, workspace, case.timeout_s, progress)
            for run in (case.run_a, case.run_b)
        }
    )

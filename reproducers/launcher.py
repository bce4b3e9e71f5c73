"""Run a generated reproducer safely and turn what it printed into an Evidence record.

Safety rules, each enforced here:
- only a reproducer recorded in the ledger runs, and only if the file's sha256 still equals
  the recorded one (an edited or foreign file is refused);
- argv lists only (python, ``torch.distributed.run``, or the ``deepspeed`` launcher), never
  a shell; the program path is the last argument and no user text reaches argv;
- the environment is built explicitly from ``EnvPolicy`` (a short inherit list plus
  explicit settings; deterministic variables are a policy knob), never the caller's whole
  environment;
- it runs through :func:`triage_agent.process.run_process`: its own session, every process
  it started ended (SIGTERM, then SIGKILL) on timeout and after it exits, dead build locks
  and shm buffers removed before and after and named in the evidence, stdout and stderr in
  files of a per-launch directory, each capped in size;
- the result line is parsed and validated (``ReproducerOutput``); a crash, a hang, garbage,
  no output, two different results or a template mismatch is ``result=error`` with the
  reason, never a false ``supported``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from triage_agent.errors import InputError
from triage_agent.evidence_data import ReproducerData
from triage_agent.ledger import Ledger, sha256_file
from triage_agent.paths import contained
from triage_agent.process import DEFAULT_OUTPUT_CAP, ProcessResult, run_process
from triage_agent.provenance import capture
from triage_agent.records import Evidence, EvidenceKind, EvidenceResult
from triage_agent.runs import free_port

from .generator import REPRO_SUBDIR, GeneratedReproducer, recorded
from .params import OUTPUT_SCHEMA, ReproducerOutput, template_info

Launcher = Literal["python", "torchrun", "deepspeed"]

DEFAULT_INHERIT = (
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "VIRTUAL_ENV",
    "PYTHONPATH",  # where the environment's packages are found, like VIRTUAL_ENV
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_VISIBLE_DEVICES",
    "TORCH_EXTENSIONS_DIR",
    "XDG_CACHE_HOME",  # where torch finds the ops it already built
    "DS_ACCELERATOR",
)
DETERMINISTIC_ENV = {
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
    "PYTHONHASHSEED": "0",
    "NCCL_ALGO": "Ring",
    "NVIDIA_TF32_OVERRIDE": "0",
}


class EnvPolicy(BaseModel):
    """The child's whole environment: what is inherited, what is set, deterministic or not."""

    inherit: list[str] = Field(default_factory=lambda: list(DEFAULT_INHERIT))
    set: dict[str, str] = Field(default_factory=dict)
    deterministic: bool = Field(
        default=False,
        description=f"add {', '.join(f'{k}={v}' for k, v in DETERMINISTIC_ENV.items())}",
    )
    threads: int | None = Field(
        default=1, description="OMP/MKL threads per process (None: inherit)"
    )

    def build(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        src = os.environ if environ is None else environ
        env = {k: src[k] for k in self.inherit if k in src}
        if self.threads is not None:
            env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(self.threads)
        if self.deterministic:
            env.update(DETERMINISTIC_ENV)
        env.update(self.set)
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("PYTHONNOUSERSITE", "1")
        return env


# What the process did, before interpretation: the runner's own record.
LaunchOutcome = ProcessResult


def run_argv(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    output_cap: int = DEFAULT_OUTPUT_CAP,
) -> LaunchOutcome:
    """Run ``argv`` in ``cwd`` (its stdout.txt and stderr.txt go there) through the runner."""
    return run_process(
        argv,
        cwd=cwd,
        env=env,
        timeout_s=timeout_s,
        stdout_path=cwd / "stdout.txt",
        stderr_path=cwd / "stderr.txt",
        output_cap=output_cap,
    )


def parse_output(stdout: str, template: str) -> ReproducerOutput:
    """The single result line of a run. Raises ValueError with a reason for anything else."""
    found: list[str] = []
    for line in stdout.splitlines():
        start = line.find('{"')
        if start >= 0 and OUTPUT_SCHEMA in line:
            found.append(line[start:].strip())
    if not found:
        raise ValueError("the reproducer printed no result line")
    if len(set(found)) > 1:
        raise ValueError(f"the reproducer printed {len(set(found))} different result lines")
    try:
        data = json.loads(found[0])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the result line is not JSON: {exc.msg}") from None
    try:
        out = ReproducerOutput.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"the result line does not validate at {loc!r}: {first['msg']}") from None
    if out.template != template:
        raise ValueError(f"the result names template {out.template!r}, expected {template!r}")
    if out.status == "ok" and out.supported is not None and not out.compared:
        raise ValueError("the result decides without saying what it compared")
    return out


def _argv_for(launcher: Launcher, program: Path, ranks: int, port: int) -> list[str]:
    if launcher == "python":
        if ranks != 1:
            raise InputError(
                "launcher 'python' runs one process; use torchrun or deepspeed for --ranks > 1"
            )
        return [sys.executable, str(program)]
    if launcher == "torchrun":
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes=1",
            f"--nproc_per_node={ranks}",
            "--master_addr=127.0.0.1",
            f"--master_port={port}",
            str(program),
        ]
    ds = shutil.which("deepspeed", path=os.path.dirname(sys.executable)) or shutil.which(
        "deepspeed"
    )
    if ds is None:
        raise InputError("the deepspeed launcher is not installed in this environment")
    return [ds, f"--num_gpus={ranks}", f"--master_port={port}", str(program)]


def resolve_recorded(
    generated_or_id: GeneratedReproducer | str, ledger: Ledger
) -> GeneratedReproducer:
    """The ledger's record of a reproducer, checked against the file on disk."""
    rid = (
        generated_or_id.id
        if isinstance(generated_or_id, GeneratedReproducer)
        else str(generated_or_id)
    )
    known = recorded(ledger)
    gen = known.get(rid)
    if gen is None:
        raise InputError(f"reproducer {rid!r} is not recorded in {ledger.path}: generate it first")
    # The file is located from the id alone: a recorded path is never trusted.
    program = contained(
        ledger.workspace / REPRO_SUBDIR / f"{gen.id}.py", [ledger.workspace / REPRO_SUBDIR]
    )
    if not program.is_file():
        raise InputError(f"reproducer file {program} is missing: generate {gen.template} again")
    if sha256_file(program) != gen.sha256:
        raise InputError(
            f"reproducer {rid} was modified after generation (sha256 mismatch): refusing to run it"
        )
    return gen


def _error(reason: str, **data: Any) -> tuple[EvidenceResult, str, dict[str, Any]]:
    return EvidenceResult.error, reason, data


def interpret(outcome: LaunchOutcome, template: str) -> tuple[EvidenceResult, str, dict[str, Any]]:
    """Map a finished process to (result, summary, data). Pure apart from reading its files."""
    stdout = Path(outcome.stdout_path).read_text(errors="replace")
    stderr_tail = Path(outcome.stderr_path).read_text(errors="replace").strip().splitlines()[-5:]
    if outcome.timed_out:
        return _error(
            f"timed out after {outcome.duration_s:.0f} s: process group killed"
            + "".join(f"; {n}" for n in outcome.notes if "build lock" in n),
            stderr_tail=stderr_tail,
        )
    try:
        out = parse_output(stdout, template)
    except ValueError as exc:
        why = f"{exc}; exit code {outcome.returncode}"
        if outcome.stdout_truncated:
            why += "; stdout was truncated at the size cap"
        return _error(why, stderr_tail=stderr_tail)
    data = {"output": out.model_dump(mode="json", by_alias=True)}
    if out.status == "error":
        exc = out.details.get("exception", "no reason given")
        return _error(f"the reproducer failed: {exc}", **data)
    if outcome.returncode != 0:
        return _error(
            f"exit code {outcome.returncode} after printing a result: not trusted",
            stderr_tail=stderr_tail,
            **data,
        )
    if out.status == "skipped":
        reason = "; ".join(out.notes) or out.compared
        return EvidenceResult.inconclusive, f"not run here: {reason}", {**data, "skipped": True}
    result = {
        True: EvidenceResult.supported,
        False: EvidenceResult.refuted,
        None: EvidenceResult.inconclusive,
    }[out.supported]
    summary = f"{template}: {result.value} ({out.compared})"
    if out.notes:
        summary += "; " + "; ".join(out.notes[:3])
    return result, summary, data


def launch(
    generated_or_id: GeneratedReproducer | str,
    workspace: str | os.PathLike[str],
    ranks: int = 1,
    launcher: Launcher = "python",
    timeout_s: float | None = None,
    env_policy: EnvPolicy | None = None,
    hypotheses: list[str] | None = None,
    record: bool = True,
    output_cap: int = DEFAULT_OUTPUT_CAP,
) -> Evidence:
    """Run a recorded reproducer; return (and by default record) its Evidence.

    Refusals (not recorded, modified, bad ranks/launcher) raise InputError before anything
    runs. Everything that happens after the process starts is Evidence, errors included.
    """
    ledger = Ledger(workspace)
    gen = resolve_recorded(generated_or_id, ledger)
    if ranks < 1 or ranks > 64:
        raise InputError(f"--ranks must be between 1 and 64, got {ranks}")
    if launcher not in ("python", "torchrun", "deepspeed"):
        raise InputError(f"unknown launcher {launcher!r}: python, torchrun or deepspeed")
    info = template_info(gen.template)
    timeout = float(timeout_s if timeout_s is not None else info.default_timeout_s)
    if not 0 < timeout <= 24 * 3600:
        raise InputError(f"timeout must be between 0 and 86400 s, got {timeout}")
    policy = env_policy or EnvPolicy()
    program = (ledger.workspace / REPRO_SUBDIR / f"{gen.id}.py").resolve()
    params_path = program.with_name(f"{gen.id}.params.json")
    stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    run_dir = program.parent / "runs" / f"{gen.id}-{stamp}"
    run_dir.mkdir(parents=True)
    argv = _argv_for(launcher, program, ranks, free_port())
    env = policy.build()
    outcome = run_argv(argv, run_dir, env, timeout, output_cap)
    result, summary, found = interpret(outcome, gen.template)
    data = ReproducerData(
        **found,
        reproducer=gen.id,
        template=gen.template,
        params=gen.params,
        launcher=launcher,
        ranks=ranks,
        returncode=outcome.returncode,
        timed_out=outcome.timed_out,
        env_policy=policy.model_dump(),
        env_set={k: v for k, v in env.items() if k not in policy.inherit},
        run_dir=str(run_dir),
    )
    if outcome.notes:
        data.launch_notes = outcome.notes
    artifacts = [
        ledger.artifact(program, role="reproducer"),
        ledger.artifact(params_path, role="params"),
        ledger.artifact(outcome.stdout_path, role="stdout"),
        ledger.artifact(outcome.stderr_path, role="stderr"),
    ]
    ev = Evidence(
        hypotheses=list(hypotheses or []),
        kind=EvidenceKind.reproducer,
        result=result,
        summary=summary,
        argv=argv,
        provenance=capture(environ=env),
        data=data,
        artifacts=artifacts,
        duration_s=outcome.duration_s,
    )
    if record:
        ledger.add_evidence(ev)
    return ev

"""Materialise the runs of a case: launch their commands (argv lists), cached in the workspace.

Every relaunch - the untraced baseline, a traced window, a policy rerun, the demo's runs -
goes through :func:`materialize`, which runs the run's launch commands in order, each
through the capture injector (level "none" when nothing is traced, so policies still
apply), through the one process runner (:mod:`triage_agent.process`): a timeout, and every
process of the command ended before its outputs are read, also after a normal exit. ``{out}`` in an
argument is replaced by the relaunch's own output directory, so no relaunch overwrites
another's files. A run made of several commands (train, save, resume in a fresh process)
is traced per command and its per-rank trace files are joined into one stream per rank.

Before anything is launched, a missing working directory or a program found neither on
``PATH`` nor as a path is refused with an :class:`InputError`. A failed or timed-out run
comes back as a :class:`RunOutcome` with ``ok`` false and ``error`` naming the command,
its exit status and the last error line of its log; it is never cached, and its directory
is cleared before the next attempt, so nothing half-made is taken for a finished run.

Results are cached under ``<workspace>/runs/<name>/<label>-<key>``, the key covering the
commands, environment overrides, policies, capture settings, the content of every file an
argument names, the commit the run's source revision resolves to and the installed
torch/DeepSpeed versions, so a second `triage run` reuses baselines. Limits: a launch that
writes outside ``{out}`` is not isolated; files imported indirectly (a library the script
imports) are covered only by their version or git revision, not by their content; two
processes materialising the same run and label at the same moment are not coordinated.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import socket
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from .errors import InputError
from .evidence_data import RerunData
from .policies import PATCHES_ENV, FunctionPatch, PatchFile, patch_events
from .process import end_side_by_side
from .records import Artifact, Case, Evidence, EvidenceKind, EvidenceResult, Provenance, RunSpec
from .seed_pins import SeedPin
from .trace_format import TRACE_GLOB, TRACE_SCHEMA_VERSION

if TYPE_CHECKING:
    from .fingerprint import CaptureConfig

OUT_TOKEN = "{out}"
OUTCOME_NAME = "outcome.json"
# bumped when what a cached run directory holds changes meaning
CACHE_VERSION = 2

Progress = Callable[[str], None]

_launched = 0
_launch_lock = threading.Lock()


def launches_started() -> int:
    """Run commands this process has started so far (relaunches run in threads, too); a
    reused outcome starts none. What the workflow counts each stage's launches from."""
    return _launched


def _count_launch() -> None:
    global _launched
    with _launch_lock:
        _launched += 1


class LaunchChanges(BaseModel):
    """What a rerun changes in how a run is launched, beyond its argv and policies."""

    env: dict[str, str | None] = Field(
        default_factory=dict, description="variables set in every process; None removes one"
    )
    patches: list[FunctionPatch] = Field(
        default_factory=list, description="functions suppressed or replaced in every process"
    )
    settings: dict[str, Any] = Field(
        default_factory=dict, description="global numeric settings set in every process"
    )
    seeds: list[SeedPin] = Field(
        default_factory=list, description="lines of the job given the other run's seeds"
    )
    outplace: list[str] = Field(
        default_factory=list, description="lines of the job whose in-place calls run out of place"
    )
    restore_state: list[str] = Field(
        default_factory=list, description="parts of training state put back after a resume"
    )
    restore_globals: dict[str, Any] = Field(
        default_factory=dict, description="the job's module globals set where a resume is declared"
    )
    sync_grads: list[str] = Field(
        default_factory=list, description="parameters whose gradients are averaged across ranks"
    )
    follow: list[str] = Field(
        default_factory=list,
        description="texts whose conversions by the job's own functions are recorded",
    )
    fill_empty: list[str] = Field(
        default_factory=list, description="lines of the job whose empty allocations are zeroed"
    )
    values: bool = Field(
        default=False, description="the small values the job's own functions see are recorded"
    )
    tie_params: list[str] = Field(
        default_factory=list, description="groups of parameter names made one tensor"
    )
    source_digest: str | None = Field(
        default=None, description="content digest of a prepared source directory the run uses"
    )
    described: list[str] = Field(
        default_factory=list, description="the interventions these changes carry, said"
    )

    def empty(self) -> bool:
        return not (
            self.env
            or self.patches
            or self.settings
            or self.seeds
            or self.outplace
            or self.restore_state
            or self.restore_globals
            or self.sync_grads
            or self.follow
            or self.fill_empty
            or self.values
            or self.tie_params
            or self.source_digest
            or self.described
        )


STATE_RECORDS = "state/records"  # under a run's directory: the state a launch captured


class AbnormalExit(BaseModel):
    """How a launch ended that wrote every step, on every rank, that a completed run of the same
    case wrote, and then did not exit 0 (a rank aborting in its communicator's teardown, a
    crash in a final save). Its metrics are whole and compared as usual; the exit is reported
    with the verdict, never retried."""

    command: int = Field(description="which command of the run, from 1")
    exit_status: int
    signal: str | None = Field(default=None, description="SIGABRT, ... when the exit names one")
    stderr_tail: list[str] = Field(default_factory=list, description="its last lines of stderr")
    log: str | None = None
    reference: str = Field(description="the completed run whose steps it wrote every one of")

    def said(self, run: str) -> str:
        how = f"exit status {self.exit_status}" + (f", {self.signal}" if self.signal else "")
        last = f"; stderr ends: {self.stderr_tail[-1]!r}" if self.stderr_tail else ""
        return (
            f"run {run} wrote every step run {self.reference} wrote, on every rank, then its "
            f"command {self.command} exited abnormally ({how}){last}"
        )


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
    step_restart: str | None = Field(
        default=None,
        description="set when a later command's steps start again below an earlier one's: "
        "its trace steps are per process, not the run's global steps",
    )
    key: str = Field(default="", description="the cache key the outputs are stored under")
    error: str | None = Field(
        default=None,
        description="why the run failed: command, exit status or timeout, last error line, log",
    )
    cwd: str | None = Field(default=None, description="the working directory the commands ran in")
    env_overrides: dict[str, str | None] = Field(
        default_factory=dict,
        description="variables set (None: removed) on top of the run's own environment",
    )
    interventions: list[str] = Field(
        default_factory=list, description="the one thing changed, said per intervention"
    )
    patches: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="per patched function: in how many processes it was patched and called",
    )
    launch_seconds: list[float] = Field(
        default_factory=list, description="the duration of each command, in order"
    )
    provenance: Provenance | None = None
    state_after: int | None = Field(
        default=None,
        description="K when the launch also captured the state after initialisation and around "
        f"step K (records in {STATE_RECORDS}/); None when it captured none",
    )
    timed_out: bool = False
    abnormal_exit: AbnormalExit | None = Field(
        default=None,
        description="set when the run completed (every step written) and then exited abnormally",
    )

    @property
    def ok(self) -> bool:
        """Completed: every command exited 0, or the run wrote every step and then exited
        abnormally (``abnormal_exit``)."""
        return (
            self.error is None
            and bool(self.exit_codes)
            and (self.abnormal_exit is not None or all(c == 0 for c in self.exit_codes))
        )


_SIGNAL_IN_LOG = re.compile(
    r"\b(SIG(?:ABRT|SEGV|BUS|FPE|ILL|KILL|TERM|INT|PIPE))\b|return code = -(\d+)"
)


def _signal_of(status: int, tail: list[str]) -> str | None:
    import signal as signals

    def name(n: int) -> str | None:
        try:
            return signals.Signals(n).name
        except ValueError:
            return None

    if status < 0:
        return name(-status)
    if status > 128:
        return name(status - 128)
    # a launcher (deepspeed, torchrun) exits 1 and says which signal ended a rank
    for line in reversed(tail):
        if m := _SIGNAL_IN_LOG.search(line):
            return m.group(1) or name(int(m.group(2)))
    return None


def completed_despite_exit(out: RunOutcome, reference: RunOutcome) -> RunOutcome:
    """``out`` recorded as completed with an abnormal exit when only its last command failed,
    by its exit status (no timeout), after every rank of ``reference`` (a completed run of
    the same case) had its every step written by ``out`` too; else ``out`` as it is.

    A user's job can finish its last step and die in teardown (gloo aborting after
    ``destroy_process_group``): its metrics are whole, and calling it a failed run would send
    the triage after a crash that is not the question. Anything less than every step is a
    failed run, as before.
    """
    from .metrics import load_metrics

    if out.ok or not reference.ok or out.timed_out or out.metrics is None:
        return out
    codes = out.exit_codes
    if len(codes) != len(out.argv) or codes[-1] == 0 or any(c != 0 for c in codes[:-1]):
        return out
    try:
        got, want = load_metrics(out.metrics), load_metrics(reference.metrics or "")
    except InputError:
        return out
    for rank, rm in want.ranks.items():
        if rank not in got.ranks or not set(rm.steps) <= set(got.ranks[rank].steps):
            return out
    if not want.ranks:
        return out
    err_log = out.logs[-1] if out.logs else None
    stderr = next((p for p in reversed(out.logs) if p.endswith("stderr.log")), err_log)
    tail = _tail(stderr)
    done = out.model_copy(
        update={
            "error": None,
            "abnormal_exit": AbnormalExit(
                command=len(codes),
                exit_status=codes[-1],
                signal=_signal_of(codes[-1], tail),
                stderr_tail=tail,
                log=stderr,
                reference=reference.run,
            ),
        }
    )
    record = Path(done.out_dir) / OUTCOME_NAME
    tmp = record.with_name(f".{OUTCOME_NAME}.tmp")
    tmp.write_text(done.model_dump_json(indent=2))
    os.replace(tmp, record)
    return done


def _tail(log: str | None, lines: int = 20) -> list[str]:
    if not log or not Path(log).is_file():
        return []
    kept = [ln.rstrip() for ln in Path(log).read_text(errors="replace").splitlines() if ln.strip()]
    return [ln[:300] for ln in kept[-lines:]]


class RerunRecord(BaseModel):
    """What one or more relaunches ran, as evidence records it: never a shell line."""

    runs: list[str]
    commands: list[list[str]] = Field(description="every command, an argv list each, in order")
    env_overrides: dict[str, dict[str, str | None]] = Field(
        default_factory=dict, description="per run, variables set (None: removed)"
    )
    interventions: dict[str, list[str]] = Field(default_factory=dict)
    seconds: float = Field(description="summed over every command of every relaunch")
    launches: int
    cached: bool = Field(description="every relaunch was reused from the cache")
    provenance: Provenance | None = None


def rerun_record(*outcomes: RunOutcome) -> RerunRecord:
    """One record of the relaunches behind a piece of evidence (a rerun of B, of A and B)."""
    return RerunRecord(
        runs=[o.run for o in outcomes],
        commands=[list(c) for o in outcomes for c in o.argv],
        env_overrides={o.run: o.env_overrides for o in outcomes if o.env_overrides},
        interventions={o.run: o.interventions for o in outcomes if o.interventions},
        seconds=round(sum(o.seconds for o in outcomes), 3),
        launches=sum(len(o.argv) for o in outcomes),
        cached=bool(outcomes) and all(o.cached for o in outcomes),
        provenance=next((o.provenance for o in outcomes if o.provenance), None),
    )


def rerun_evidence(
    out: RunOutcome,
    data: RerunData,
    *,
    hypotheses: list[str],
    result: EvidenceResult,
    summary: str,
    artifacts: list[Artifact] | None = None,
) -> Evidence:
    """The evidence of one rerun: ``data`` completed with the record of what ran and where
    its output went, and the command itself when the rerun was a single one; the provenance
    is the evidence's own, not repeated in the record."""
    record = rerun_record(out)
    return Evidence(
        hypotheses=hypotheses,
        kind=EvidenceKind.rerun,
        result=result,
        summary=summary,
        argv=out.argv[0] if len(out.argv) == 1 else None,
        provenance=out.provenance,
        data=data.model_copy(
            update={
                "rerun": record.model_dump(mode="json", exclude={"provenance"}),
                "out_dir": out.out_dir,
            }
        ),
        artifacts=artifacts or [],
        duration_s=record.seconds,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expand(argv: list[str], out: Path, port: int | None = None) -> list[str]:
    """Replace the case tokens: {out}, {python}, {bin}, and {port} (a free TCP port per command,
    so two relaunches can run side by side).

    A DeepSpeed launch that names no port at all gets that free port too: the launcher's
    default (29500) is shared by every job on the host, and DeepSpeed's CPU all-reduce
    names its shared-memory buffers after MASTER_ADDR and MASTER_PORT, so two jobs on the
    default port meet in the same buffers and hang or read each other's data.
    """
    bindir = str(Path(sys.executable).parent)
    port_s = str(port if port is not None else free_port())
    args = [
        a.replace(OUT_TOKEN, str(out))
        .replace("{python}", sys.executable)
        .replace("{bin}", bindir)
        .replace("{port}", port_s)
        for a in argv
    ]
    if (
        args
        and Path(args[0]).name == "deepspeed"
        and not any(a.startswith("--master_port") for a in args)
    ):
        args.insert(1, f"--master_port={port_s}")
    return args


def require_relaunchable(run: RunSpec) -> None:
    if not run.launch:
        raise InputError(
            f"run {run.name!r} has no launch commands: set runs.<name>.launch in the case"
        )
    if not any(OUT_TOKEN in a for argv in run.launch for a in argv):
        raise InputError(
            f"run {run.name!r}: its launch commands must write under '{{out}}' "
            "(for example --out {out}) so a relaunch never overwrites the original outputs"
        )
    if run.metrics is None or OUT_TOKEN not in run.metrics:
        raise InputError(
            f"run {run.name!r}: metrics must point under '{{out}}' (for example metrics = \"{{out}}\")"
        )


def _metrics_path(run: RunSpec, out: Path) -> Path:
    # config loading may have put a directory in front of '{out}': only what follows counts
    suffix = (run.metrics or OUT_TOKEN).split(OUT_TOKEN, 1)[1].lstrip("/")
    return out / suffix if suffix else out


def launch_env(run: RunSpec, changes: LaunchChanges | None = None) -> dict[str, str]:
    """The environment of every command: the caller's, the run's overrides, a rerun's
    changes, and the interpreter's bin directory first on PATH, so a launcher's helpers (the
    ranks' interpreter, a JIT build's ninja) come from the environment running triage."""
    env = {**os.environ, **run.env}
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    for k, v in (changes.env if changes else {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def check_launchable(run: RunSpec, env: dict[str, str] | None = None) -> None:
    """Refuse, before anything starts, a missing working directory or program."""
    require_relaunchable(run)
    cwd = Path(run.cwd or ".")
    if not cwd.is_dir():
        raise InputError(f"run {run.name!r}: working directory {cwd} does not exist")
    path = (env if env is not None else launch_env(run)).get("PATH")
    for k, raw in enumerate(run.launch):
        if not raw or not raw[0]:
            raise InputError(f"run {run.name!r}: launch command {k + 1} is empty")
        prog = expand(raw[:1], cwd, port=0)[0]
        if os.sep in prog:
            found = (cwd / prog).is_file()
        else:
            found = shutil.which(prog, path=path) is not None
        if not found:
            raise InputError(
                f"run {run.name!r}: program {prog!r} of launch command {k + 1} not found "
                f"(looked on PATH and relative to {cwd})"
            )


@functools.cache
def library_versions() -> dict[str, str | None]:
    """Installed torch and DeepSpeed: an upgrade changes a run's bits, so it changes the key."""
    out: dict[str, str | None] = {}
    for dist in ("torch", "deepspeed"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def source_commit(run: RunSpec) -> str | None:
    """The commit the run's source revision names now, so a moved branch or tag is a new key."""
    if run.source is None or run.source.rev is None:
        return None
    import git
    from gitdb.exc import ODBError

    try:
        return git.Repo(run.source.repo).commit(run.source.rev).hexsha
    # an unknown revision is gitdb's BadName, not a GitError
    except (git.GitError, ODBError, ValueError) as exc:
        raise InputError(
            f"run {run.name!r}: cannot resolve revision {run.source.rev!r} in {run.source.repo}: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None


def _content_hash(run: RunSpec) -> str:
    h = hashlib.sha256()
    # Where the case lives is not part of the key (cwd, the repository's path); what its
    # named files hold and which commit its source is at are.
    spec = run.model_dump(mode="json", exclude={"cwd", "source"})
    spec["metrics"] = (run.metrics or "").split(OUT_TOKEN, 1)[-1]
    spec["source_commit"] = source_commit(run)
    if run.source is not None and run.source.package:
        spec["source_package"] = run.source.package
    spec["versions"] = library_versions()
    spec["cache_version"] = CACHE_VERSION
    # a cached traced run written in an older trace format is re-made, never refused
    spec["trace_schema"] = TRACE_SCHEMA_VERSION
    h.update(json.dumps(spec, sort_keys=True).encode())
    cwd = Path(run.cwd or ".")
    for argv in run.launch:
        for a in argv:
            p = cwd / a
            if OUT_TOKEN not in a and len(a) < 4096 and p.is_file():
                h.update(a.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def run_key(
    run: RunSpec,
    policies: list[str],
    capture: BaseModel | None,
    changes: LaunchChanges | None = None,
) -> str:
    h = hashlib.sha256(_content_hash(run).encode())
    h.update(json.dumps(sorted(policies)).encode())
    if capture is not None:
        h.update(capture.model_dump_json(exclude={"out_dir", "run_id"}).encode())
    if changes is not None and not changes.empty():
        h.update(changes.model_dump_json().encode())
    return h.hexdigest()[:12]


def step_restart(segments: list[Path]) -> str | None:
    """Say so when a command's first step is not after the previous command's last one.

    A resumed process whose script does not restore its step counter (plain torch counts
    optimizer steps from 0 in every process; DeepSpeed's engine restores its own) labels
    its steps from 0 again: comparing its "step 10" with the other run's step 10 would pair
    different steps without a word.
    """
    last: int | None = None
    for k, seg in enumerate(segments):
        seen: set[int] = set()
        resumed: set[int | None] = set()
        for st in seg.glob("capture_rank*.json"):
            try:
                status = json.loads(st.read_text())
            except (OSError, ValueError):
                continue
            seen.update(status.get("steps_seen", []))
            resumed.add(status.get("resumed_from"))
        if not seen:
            continue
        if len(resumed) == 1 and (r := resumed.pop()) is not None and min(seen) == r + 1:
            # a process that declared its resume from step R (a preempted job resuming from
            # its last checkpoint, behind where it stopped): its steps are global steps, and
            # those it runs again replace the earlier process's (join_trace_segments)
            last = max(seen)
            continue
        # One early step before a jump is a step begun before the checkpoint was loaded
        # (DeepSpeed's engine counts from 0 until load_checkpoint restores its counter);
        # a restart is two or more steps at or below the previous command's last one.
        below = sorted(x for x in seen if last is not None and x <= last)
        if below and (len(below) >= 2 or len(below) == len(seen)):
            return (
                f"STEP NUMBERS RESTART: command {k + 1} begins at step {below[0]} after an "
                f"earlier command reached step {last}; the script does not restore its step "
                "counter on resume, so this run's trace steps are not its global steps and a "
                "trace comparison by step would pair different steps"
            )
        last = max(seen)
    return None


def _steps_in(trace: Path) -> set[int]:
    """The steps a trace file holds events of."""
    steps: set[int] = set()
    for line in trace.read_text().splitlines():
        if '"type":"event"' in line.replace(" ", ""):
            try:
                steps.add(int(json.loads(line).get("step", -1)))
            except (ValueError, TypeError):
                continue
    return steps


def join_trace_segments(segments: list[Path], out: Path) -> list[Path]:
    """Join per-command trace files into one stream per rank (header of the first segment)."""
    by_rank: dict[str, list[Path]] = {}
    for seg in segments:
        for f in sorted(seg.glob(TRACE_GLOB)):
            by_rank.setdefault(f.name, []).append(f)
    written: list[Path] = []
    for name, files in sorted(by_rank.items()):
        # a step a later command runs again (a resume from a checkpoint behind where the
        # earlier one stopped) is the later command's: the run's metrics are its too
        later: list[set[int]] = [set() for _ in files]
        for i in range(len(files) - 2, -1, -1):
            later[i] = later[i + 1] | _steps_in(files[i + 1])
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
                    replayed = rec.get("step", -1) in later[i] and rec["step"] >= 0
                    if kind in ("event", "step_end") and replayed:
                        continue
                    if kind == "event":
                        rec["seq"] = seq
                        seq += 1
                        rec.setdefault("meta", {})["segment"] = i
                        if rec.get("dump"):  # dumps stay in the segment's folder
                            rec["dump"] = os.path.relpath(f.parent / rec["dump"], out)
                        line = json.dumps(rec, separators=(",", ":"))
                    w.write(line + "\n")
            end = {
                "type": "end",
                "status": status,
                "steps": sorted(set(steps)),
                "note": f"joined {len(files)} segment(s)",
            }
            w.write(json.dumps(end) + "\n")
        written.append(dest)
    return written


# An exception line ("ValueError: ...", optionally rank-prefixed by a launcher).
_EXC_LINE = re.compile(r"^(?:\[[^\]]*\]:?\s*)?(?:\w+\.)*\w*(?:Error|Exception): \S")
# What the other ranks and the launcher say after one rank died: never the cause.
_FOLLOW_ON = re.compile(
    r"connection closed by peer|connection reset|broken pipe|gloo|nccl.*(?:remote|abort)"
    r"|ChildFailedError|CalledProcessError|exits with return code|died|Terminat|SIGTERM",
    re.IGNORECASE,
)


def _last_error_line(*logs: str | None) -> str:
    """The line that names why the run failed, stderr first.

    When one rank of several fails, the others and the launcher fail after it, and their
    messages come last ("Connection closed by peer", "exits with return code 1"); the first
    exception that is not such a follow-on is the cause. Else the last line that reads like an
    error, else the last line at all.
    """
    last = ""
    for log in logs:
        if not log or not Path(log).is_file():
            continue
        lines = [
            ln.strip() for ln in Path(log).read_text(errors="replace").splitlines() if ln.strip()
        ]
        cause = next(
            (ln for ln in lines if _EXC_LINE.match(ln) and not _FOLLOW_ON.search(ln)), None
        )
        if cause:
            return cause[:200]
        for ln in reversed(lines):
            if "Error" in ln or "error:" in ln:
                return ln[:200]
        last = last or (lines[-1][:200] if lines else "")
    return last or "(no output)"


def _reusable(done: Path) -> RunOutcome | None:
    if not done.is_file():
        return None
    try:
        prev = RunOutcome.model_validate_json(done.read_text())
    except ValueError:
        return None  # an unreadable record: produce the run again rather than trust it
    if not prev.ok or (prev.metrics is not None and not Path(prev.metrics).exists()):
        return None
    return prev


def finished(run: RunSpec, workspace: Path, label: str = "baseline") -> RunOutcome | None:
    """The finished outputs :func:`materialize` would reuse for ``run`` under ``label`` (no
    policies, capture or changes), or None; never launches anything."""
    key = run_key(run, [], None, LaunchChanges())
    return _reusable((Path(workspace) / "runs" / run.name / f"{label}-{key}") / OUTCOME_NAME)


def materialize(
    run: RunSpec,
    workspace: Path,
    label: str,
    *,
    capture: BaseModel | None = None,
    policies: list[str] | None = None,
    timeout_s: float = 600.0,
    reuse: bool = True,
    progress: Progress | None = None,
    changes: LaunchChanges | None = None,
    state_after: int | None = None,
) -> RunOutcome:
    """Launch ``run`` into ``workspace/runs/<name>/<label>-<key>``; reuse a finished one.

    ``changes`` are a rerun's environment overrides and function patches (see
    :mod:`triage_agent.interventions`); they are part of the key. ``state_after`` K: a
    launch also captures the state at step boundaries (after initialisation, after step K,
    at step K+1) without stopping the run (:mod:`triage_agent.boundary_capture`, which only
    reads), into ``<out>/state/records``. It is not part of the key: what the run computes
    is the same with it or without, and a reused run keeps what it captured, if anything.
    Raises InputError for a run that cannot be launched (no commands, nothing under ``{out}``, a missing program or
    working directory, an unresolvable source revision). A run that starts and then fails
    comes back with ``ok`` false and ``error`` set.
    """
    from .fingerprint import CaptureConfig, capture_command
    from .provenance import capture as provenance

    say = progress or (lambda _msg: None)
    changes = changes or LaunchChanges()
    env = launch_env(run, changes)
    check_launchable(run, env)
    if run.source is not None and run.source.package and "PYTHONPATH" not in changes.env:
        from .bisect.package import package_on_path  # a checkout, first on PYTHONPATH

        package_on_path(run, env)
    pols = list(policies or [])
    key = run_key(run, pols, capture, changes)
    out = (Path(workspace) / "runs" / run.name / f"{label}-{key}").resolve()
    done = out / OUTCOME_NAME
    if reuse and (prev := _reusable(done)) is not None:
        say(f"{run.name}/{label}: reusing finished outputs {out.name}")
        return prev.model_copy(update={"cached": True})
    if out.is_symlink():
        raise InputError(f"run directory {out} is a link: remove it, the workspace owns it")
    if out.exists():
        shutil.rmtree(out)  # a failed, unfinished or refused attempt: start clean
    out.mkdir(parents=True)
    argvs = [expand(a, out) for a in run.launch]
    job_env = dict(env)  # what the job's provenance records: the capture's variables are ours
    if state_after is not None:
        env.update(_state_capture_env(out, state_after, env.get("PYTHONPATH")))
    report = out / "patches.report.jsonl"
    if (
        changes.patches
        or changes.settings
        or changes.seeds
        or changes.outplace
        or changes.restore_state
        or changes.restore_globals
        or changes.sync_grads
        or changes.follow
        or changes.fill_empty
        or changes.values
        or changes.tie_params
    ):
        spec = PatchFile(
            patches=changes.patches,
            settings=changes.settings,
            seeds=changes.seeds,
            outplace=changes.outplace,
            restore_state=changes.restore_state,
            restore_globals=changes.restore_globals,
            sync_grads=changes.sync_grads,
            follow=changes.follow,
            fill_empty=changes.fill_empty,
            values=changes.values,
            tie_params=changes.tie_params,
            report=str(report),
        )
        (out / "patches.json").write_text(spec.model_dump_json(indent=1))
        env[PATCHES_ENV] = str(out / "patches.json")
    outcome = RunOutcome(
        run=run.name,
        label=label,
        out_dir=str(out),
        metrics=str(_metrics_path(run, out)),
        argv=argvs,
        policies=pols,
        key=key,
        cwd=str(Path(run.cwd or ".").resolve()),
        env_overrides=changes.env,
        interventions=changes.described,
        state_after=state_after,
        provenance=provenance(
            repos={run.name: run.cwd} if run.cwd else None,
            environ=job_env,
            import_torch="torch" in sys.modules,
            workspace=workspace,
        ),
    )
    segments: list[Path] = []
    for k, argv in enumerate(argvs):
        say(f"{run.name}/{label}: command {k + 1}/{len(argvs)}: {' '.join(run.launch[k][:4])} ...")
        seg = out / "trace" / f"seg{k}"
        update = {"out_dir": seg, "run_id": f"{run.name}-{label}", "policies": pols}
        cfg = (
            capture.model_copy(update=update)
            if capture is not None
            else CaptureConfig(level="none", **update)
        )
        _count_launch()
        res = capture_command(
            argv, cfg, cwd=run.cwd, env=env, timeout_s=timeout_s, log_dir=out / "logs" / f"seg{k}"
        )
        outcome.exit_codes.append(124 if res.timed_out or res.exit_code is None else res.exit_code)
        outcome.launch_seconds.append(res.duration_s)
        outcome.logs += [p for p in (res.stdout_log, res.stderr_log) if p]
        outcome.warnings += (
            res.warnings
            if len(argvs) == 1
            # the window is the run's, not each command's: a save that stops before it is
            # no warning (said once below, from the joined trace)
            else [f"command {k + 1}/{len(argvs)}: {w}" for w in res.warnings if not _window(w)]
        )
        segments.append(seg)
        where = f"run {run.name!r} command {k + 1}/{len(argvs)}"
        if res.timed_out or res.exit_code is None:
            outcome.timed_out = True
            outcome.error = f"{where} ran past {timeout_s:g}s; its process group was ended (log: {res.stderr_log})"
            break
        if res.exit_code != 0:
            outcome.error = (
                f"{where} exited {res.exit_code}: {_last_error_line(res.stderr_log, res.stdout_log)} "
                f"(log: {res.stderr_log})"
            )
            break
    outcome.seconds = round(sum(outcome.launch_seconds), 3)
    if (
        changes.patches
        or changes.seeds
        or changes.outplace
        or changes.restore_state
        or changes.restore_globals
        or changes.sync_grads
        or changes.fill_empty
        or changes.tie_params
    ):
        # a patch no process reports is listed too: it never took effect
        listed = [p.target for p in changes.patches]
        listed += [f"pin-seed {p.site}" for p in changes.seeds]
        listed += [f"outplace {site}" for site in changes.outplace]
        listed += [f"restore-state {part}" for part in changes.restore_state]
        listed += [f"restore-globals {name}" for name in changes.restore_globals]
        listed += [f"sync-grads {name}" for name in changes.sync_grads]
        listed += [f"fill-empty {site}" for site in changes.fill_empty]
        listed += [f"tie-params {g}" for g in changes.tie_params]
        outcome.patches = {t: {} for t in listed} | patch_events(report)
    if outcome.error is None and not Path(outcome.metrics).exists():
        outcome.error = f"run {run.name!r} finished but wrote no metrics at {outcome.metrics}"
    if capture is not None and getattr(capture, "level", "none") != "none":
        tdir = out / "trace"
        joined = join_trace_segments(segments, tdir)
        outcome.trace_dir = str(tdir)
        if len(argvs) > 1 and outcome.error is None:
            outcome.warnings += _window_warning(capture, joined, len(argvs))
        outcome.step_restart = step_restart(segments)
        if outcome.step_restart:
            outcome.warnings.append(outcome.step_restart)
    if outcome.ok:
        tmp = done.with_name(f".{OUTCOME_NAME}.tmp")
        tmp.write_text(outcome.model_dump_json(indent=2))
        os.replace(tmp, done)  # written last: its presence means the outputs are complete
        say(f"{run.name}/{label}: done in {outcome.seconds:.1f}s")
    else:
        say(f"{run.name}/{label}: failed: {outcome.error}")
    return outcome


_WINDOW = ("step range ", "steps [", "no process wrote a trace")


def _window(warning: str) -> bool:
    """A capture warning about the step window (never reached, partly traced, no trace)."""
    return warning.startswith(_WINDOW)


def _window_warning(capture: CaptureConfig, files: list[Path], commands: int) -> list[str]:
    """The window checked against the trace every command of a run wrote together."""
    from .fingerprint.command import summarize_trace

    if capture.steps is None:
        return []
    traced = {s for f in files for s in summarize_trace(f).steps}
    a, b = capture.steps
    missing = [s for s in range(a, b + 1) if s not in traced]
    if not files:
        return [f"no process of the {commands} commands wrote a trace of steps {a}-{b}"]
    if len(missing) == b - a + 1:
        return [f"step range {a}-{b} never occurred in any of the {commands} commands"]
    if missing:
        return [f"steps {missing} of the window {a}-{b} were not traced by any command"]
    return []


def _state_capture_env(out: Path, k: int, pythonpath: str | None) -> dict[str, str]:
    from .boundary_capture import BoundaryConfig
    from .boundary_capture import launch_env as capture_env

    cfg = out / "state" / "config.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    records = BoundaryConfig(out_dir=str(out / STATE_RECORDS), after_step=k, stop=False)
    cfg.write_text(records.model_dump_json())
    return capture_env(cfg, pythonpath)


def materialize_both(
    case: Case, workspace: Path, label: str, **kw: Any
) -> tuple[RunOutcome, RunOutcome]:
    """Runs A and B under the same label and settings (``kw``: :func:`materialize`'s), side
    by side: each launch spends seconds starting up (imports, rendezvous) that the other
    launch's compute can overlap."""
    with ThreadPoolExecutor(2) as pool:
        fa = pool.submit(materialize, case.run_a, workspace, label, **kw)
        fb = pool.submit(materialize, case.run_b, workspace, label, **kw)
        try:
            a, b = fa.result(), fb.result()
        except BaseException:
            end_side_by_side(pool)
            raise
    return completed_despite_exit(a, b), completed_despite_exit(b, a)


def materialize_case(
    case: Case,
    workspace: Path | None = None,
    progress: Progress | None = None,
    *,
    check: bool = True,
    state_after: int | None = None,
) -> tuple[RunOutcome, RunOutcome]:
    """Produce (or reuse) the untraced baselines of runs A and B, with the case's timeout.

    The label is "baseline", so these are the same cached outputs the workflow uses.
    ``workspace`` defaults to the case's. With ``check`` a failed run raises InputError
    carrying its ``error``; without it both outcomes come back as they are.
    ``state_after``: launched now, they also capture the state around that step
    (:func:`materialize`'s); a cached baseline is reused as it is.
    """
    ws = Path(workspace if workspace is not None else case.workspace)
    outs = materialize_both(
        case,
        ws,
        "baseline",
        timeout_s=case.timeout_s,
        progress=progress,
        state_after=state_after,
    )
    if check:
        for o in outs:
            if not o.ok:
                raise InputError(f"baseline {o.error or f'run {o.run!r} failed'}")
    return outs

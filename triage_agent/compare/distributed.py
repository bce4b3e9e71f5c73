"""Comparing two native runs rank by rank on worker processes or a Ray cluster.

Why: a run of a few thousand ranks is a few thousand rank files per run, and each rank's
comparison (scan both files, align, walk to the first origin) depends on nothing but its two
files. So the ranks are split into chunks of neighbouring ranks, every worker reads its
ranks' files from the shared path itself (nothing but paths travels to it, and only small
``RankResult`` records come back), and the results merge into the very ``CompareResult`` the
serial comparison returns: the same per-rank results, cross-rank summary, warnings (in the
serial reader's order: run A's files in name order, then B's, then world sizes, then ranks
one run lacks) and ``complete`` flag. ``compare_paths`` is the one entry point for all three
ways (serial, ``workers`` processes, ``ray``).

Limits: native traces only (``trace_rank*.jsonl``, ``.gz`` too); the other formats load
into memory whole and are compared serially. Every worker must see the traces under the
same path (a shared file system); with ``ray`` the paths are made absolute here. With
``ranks``, only those ranks' files are read, so warnings and ``complete`` concern them
(the serial reader reads every file). A rank file a worker cannot read or parse fails the
comparison with one line naming every such rank, its file and the worker's host, after
all other ranks were compared; a rank file missing from one run is an ``only-in-*`` rank.
"""

from __future__ import annotations

import os
import resource
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from ..errors import InputError, TriageError
from .engine import (
    RunsContext,
    assemble,
    compare_rank,
    compare_runs,
    plan_ranks,
    unpaired_rank,
    world_size_warning,
)
from .errors import MalformedTraceError, RankFailuresError
from .executors import check_ray_address, open_pool
from .importers import detect, load_pair, load_runs
from .mapping import Mapping, load_mapping
from .reader import (
    add_rank,
    check_file_rank,
    file_rank,
    native_files,
    read_header,
    read_rank_file,
    run_identity,
)
from .result import CompareResult, RankResult, RunInfo

# Chunks per slot: enough that a slow chunk does not leave the others idle at the end, few
# enough that per-task overhead (milliseconds on Ray) stays small next to a chunk's work.
CHUNKS_PER_SLOT = 8
MAX_ERRORS_SHOWN = 3

Progress = Callable[[int, int], None]


class Executor(BaseModel):
    """Where the per-rank comparisons run: here, ``workers`` local processes, or Ray."""

    workers: int = Field(
        default=1, ge=1, le=1024, description="local worker processes (1: compare here)"
    )
    ray: str | None = Field(
        default=None,
        max_length=256,
        description="compare on Ray: 'local' starts a cluster here; an address "
        "(host:port, ray://host:port, auto) uses an existing one; workers caps the tasks; "
        "the Ray workers must see the traces under the same path; needs the ray extra",
    )

    @field_validator("ray")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        return None if v is None else check_ray_address(v)

    @property
    def distributed(self) -> bool:
        return self.ray is not None or self.workers > 1


class DistributedStats(BaseModel):
    """How a distributed comparison ran (not part of the result, which is executor-free)."""

    backend: str
    slots: int
    chunks: int
    hosts: list[str]
    worker_processes: int = Field(description="distinct worker processes that compared ranks")
    worker_peak_rss_mb: float = Field(description="largest peak RSS of any worker process")
    worker_cpu_s: float = Field(description="CPU seconds the workers spent on the ranks")
    startup_s: float = Field(description="until the pool was ready (a local Ray cluster starts)")
    seconds: float


@dataclass(frozen=True)
class RankJob:
    rank: int
    file_a: str | None
    file_b: str | None


@dataclass(frozen=True)
class Chunk:
    jobs: tuple[RankJob, ...]
    ctx_traced: int
    mapping: Mapping | None
    strict: bool


@dataclass
class RankOutcome:
    rank: int
    result: RankResult | None = None  # None: only one run has it (``events``) or ``error``
    events: int = 0
    headers: dict[str, dict[str, Any]] = field(default_factory=dict)  # side -> run_id, world
    warnings: dict[str, list[str]] = field(default_factory=dict)  # side -> reader warnings
    error: str | None = None


@dataclass
class ChunkOutcome:
    ranks: list[RankOutcome]
    host: str
    pid: int
    peak_rss_mb: float
    cpu_s: float


def _read(path: str, rank: int, strict: bool) -> tuple[Any, list[str]]:
    f = Path(path)
    stream, warnings = read_rank_file(f, strict=strict)
    check_file_rank(f, stream.rank)
    if stream.rank != rank:  # a file named otherwise, rewritten since it was listed
        raise MalformedTraceError(f"{f}:1: header says rank {stream.rank}, expected {rank}")
    return stream, warnings


def _compare_job(job: RankJob, chunk: Chunk) -> RankOutcome:
    out = RankOutcome(job.rank)
    streams = {}
    for side, path in (("a", job.file_a), ("b", job.file_b)):
        if path is None:
            continue
        streams[side], out.warnings[side] = _read(path, job.rank, chunk.strict)
        h = streams[side].header
        out.headers[side] = {"run_id": h["run_id"], "world_size": h["world_size"]}
    if len(streams) == 2:
        # native traces always record inputs; run A's world size is every A file's (the
        # merge refuses a run whose files disagree)
        ctx = RunsContext(True, out.headers["a"]["world_size"], chunk.ctx_traced)
        out.result = compare_rank(streams["a"], streams["b"], ctx, chunk.mapping)
    else:
        out.events = len(next(iter(streams.values())))
    return out


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc)


def compare_chunk(chunk: Chunk) -> ChunkOutcome:
    """The worker's part: compare each rank of the chunk from its files. A rank whose file
    cannot be read or parsed comes back as an error for that rank, never as a result."""
    host = socket.gethostname()
    cpu0 = time.process_time()
    outs = []
    for job in chunk.jobs:
        try:
            outs.append(_compare_job(job, chunk))
        except (TriageError, OSError) as exc:
            outs.append(RankOutcome(job.rank, error=f"rank {job.rank} on {host}: {_why(exc)}"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return ChunkOutcome(outs, host, os.getpid(), peak, time.process_time() - cpu0)


def list_ranks(path: Path) -> list[tuple[Path, int]]:
    """(file, rank) of a native run in file-name order; the rank from the name, or from the
    header line of a single file named otherwise. Duplicate ranks are refused here."""
    seen: dict[int, Path] = {}
    for f in native_files(path):
        rank = file_rank(f)
        if rank is None:
            with open(f, "rb") as fh:
                rank = read_header(fh.readline(), f)["rank"]
        add_rank(seen, rank, f, f, path)
    return [(f, r) for r, f in seen.items()]


def _chunks(jobs: list[RankJob], slots: int, traced: int, mapping, strict) -> list[Chunk]:
    n = max(1, min(len(jobs), slots * CHUNKS_PER_SLOT))
    size = -(-len(jobs) // n)
    return [
        Chunk(tuple(jobs[i : i + size]), traced, mapping, strict) for i in range(0, len(jobs), size)
    ]


def _label(chunk: Chunk) -> str:
    first, last = chunk.jobs[0].rank, chunk.jobs[-1].rank
    return f"rank {first}" if first == last else f"ranks {first}-{last}"


def _raise_failures(failed: list[RankOutcome], total: int) -> None:
    shown = "; ".join(o.error or "" for o in failed[:MAX_ERRORS_SHOWN])
    more = failed[MAX_ERRORS_SHOWN:]
    rest = f"; and {len(more)} more (ranks {', '.join(str(o.rank) for o in more[:20])}" + (
        ", ...)" if len(more) > 20 else ")"
    )
    raise RankFailuresError(
        f"{len(failed)} of {total} rank(s) could not be compared: {shown}" + (rest * bool(more))
    )


def _run_side(
    side: str, path: Path, files: list[tuple[Path, int]], outs: dict[int, RankOutcome]
) -> tuple[RunInfo, list[str]]:
    """RunInfo and reader warnings of one run, in the serial reader's order."""
    warnings: list[str] = []
    headers = []
    for _, r in files:
        o = outs.get(r)
        if o is not None and side in o.headers:
            warnings += o.warnings[side]
            headers.append(o.headers[side])
    run_id, world, more = run_identity(path, headers)
    info = RunInfo(
        path=str(path),
        fmt="native",
        run_id=run_id,
        world_size=world,
        ranks=sorted(r for _, r in files),
    )
    return info, [f"{side.upper()}: {w}" for w in warnings + more]


def compare_native_distributed(
    a: Path,
    b: Path,
    executor: Executor,
    mapping: Mapping | None = None,
    ranks: list[int] | None = None,
    strict: bool = False,
    progress: Progress | None = None,
) -> tuple[CompareResult, DistributedStats]:
    """``compare_runs(load_run(a), load_run(b), ...)`` for native runs, each rank compared
    on a worker; returns the result and how the work ran."""
    t0 = time.perf_counter()
    if executor.ray is not None:
        a, b = a.absolute(), b.absolute()  # every node must find them under the same path
    files_a, files_b = list_ranks(a), list_ranks(b)
    by_a, by_b = {r: f for f, r in files_a}, {r: f for f, r in files_b}
    wanted, _ = plan_ranks(by_a, by_b, ranks)
    jobs = [
        RankJob(r, str(by_a[r]) if r in by_a else None, str(by_b[r]) if r in by_b else None)
        for r in wanted
    ]
    traced = min(len(by_a), len(by_b))
    outs: dict[int, RankOutcome] = {}
    hosts: set[str] = set()
    procs: set[tuple[str, int]] = set()
    peak = cpu = 0.0

    def take(c: ChunkOutcome) -> None:
        nonlocal peak, cpu
        cpu += c.cpu_s
        outs.update((o.rank, o) for o in c.ranks)
        hosts.add(c.host)
        procs.add((c.host, c.pid))
        peak = max(peak, c.peak_rss_mb)
        if progress is not None:
            progress(len(outs), len(jobs))

    with open_pool(executor.workers, executor.ray) as pool:
        startup = time.perf_counter() - t0
        chunks = _chunks(jobs, pool.slots, traced, mapping, strict)
        pool.map(compare_chunk, chunks, take, _label)
    failed = [outs[r] for r in wanted if outs[r].error is not None]
    if failed:
        _raise_failures(failed, len(wanted))
    info_a, warnings = _run_side("a", a, files_a, outs)
    info_b, warn_b = _run_side("b", b, files_b, outs)
    warnings += warn_b + world_size_warning(info_a.world_size, info_b.world_size)
    results: list[RankResult] = []
    for r in wanted:
        o = outs[r]
        if o.result is not None:
            results.append(o.result)
            continue
        res, warning = unpaired_rank(r, "a" if r in by_a else "b", o.events)
        results.append(res)
        warnings.append(warning)
    stats = DistributedStats(
        backend="ray" if executor.ray is not None else "processes",
        slots=pool.slots,
        chunks=len(chunks),
        hosts=sorted(hosts),
        worker_processes=len(procs),
        worker_peak_rss_mb=round(peak, 1),
        worker_cpu_s=round(cpu, 2),
        startup_s=round(startup, 3),
        seconds=round(time.perf_counter() - t0, 3),
    )
    return assemble(info_a, info_b, mapping, results, warnings), stats


def compare_paths(
    a: str | Path,
    b: str | Path | None,
    *,
    input_format: str = "auto",
    mapping: Mapping | str | Path | None = None,
    ranks: list[int] | None = None,
    strict: bool = False,
    executor: Executor | None = None,
    progress: Progress | None = None,
) -> CompareResult:
    """Load and compare two runs (``b`` None: one file holding both), serially or, with a
    distributed ``executor``, rank by rank on workers. The result is the same either way."""
    if isinstance(mapping, str | Path):
        mapping = load_mapping(mapping)
    executor = executor or Executor()
    if not executor.distributed:
        run_a, run_b = (
            load_pair(a, input_format) if b is None else load_runs(a, b, input_format, strict)
        )
        return compare_runs(run_a, run_b, mapping=mapping, ranks=ranks)
    if b is None:
        raise InputError("--workers/--ray compare two native runs; give run A and run B")
    pa, pb = Path(a), Path(b)
    for p in (pa, pb):
        kind = input_format if input_format != "auto" else detect(p)
        if kind != "native":
            raise InputError(
                f"{p}: {kind} traces are compared in one process; --workers/--ray read "
                "native rank files (trace_rank*.jsonl)"
            )
    return compare_native_distributed(pa, pb, executor, mapping, ranks, strict, progress)[0]

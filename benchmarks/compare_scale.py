"""Compare at the published scale: 2,432 ranks per run, serially, on local processes, on Ray.

Megatron publishes bitwise determinism at 2,432 GPUs; a trace of such a run is 2,432 rank
files per run. This synthesises them (one origin rank, every other rank a receiver of a
difference that arrives from outside its capture, as from a collective), then compares the
two runs three ways, each in a fresh process so that each peak memory is its own:

- serial: ``load_runs`` + ``compare_runs`` in one process (run A read in a forked child);
- processes: ``--workers N`` local worker processes;
- ray: a local Ray cluster started for the run (its start-up is part of the time).

Each mode's ``CompareResult`` is checked to be byte-identical JSON to the serial one (and
the origin rank and receiver count to be what was planted). Prints a table and a last line
``scale: R ranks compared in S s on ray (serial T s, W workers)``.

    python benchmarks/compare_scale.py [--ranks 2432] [--events 1000] [--workers 2]
        [--diverge-at 0.9] [--workdir /tmp/cmp_scale] [--modes serial,processes,ray] [--json]
    python benchmarks/compare_scale.py --worker-memory 1000,10000,100000,1000000

``--worker-memory`` measures what one worker needs instead: the peak RSS of a fresh worker
process comparing one receiver rank of each size, against the same process after its
imports.

Synthesis is not timed and is reused when the directory holds the same spec. Disk: about
400 bytes per event, so 2,432 x 1,000 events is 1.9 GB for the two runs and 2,432 x 10,000
is 19 GB. Limits: one machine, so "ray" here is Ray's scheduling and transport overhead on
the same cores, not a cluster's; the traces sit in this machine's page cache when they fit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from triage_agent.compare.synth import SynthSpec, write_pair

MODES = ("serial", "processes", "ray")


def _spec(rank: int, ranks: int, events: int, at: float) -> SynthSpec:
    cut = int(events * at)
    kw = {"diverge_at": cut} if rank == 0 else {"receive_at": min(events - 1, cut + 1)}
    return SynthSpec(events=events, steps=4, rank=rank, world_size=ranks, **kw)


def _write(args: tuple[int, int, int, float, str]) -> None:
    rank, ranks, events, at, root = args
    write_pair(_spec(rank, ranks, events, at), Path(root))


def synthesise(root: Path, ranks: int, events: int, at: float, workers: int) -> float:
    """Write both runs under ``root`` unless it already holds this spec; returns seconds."""
    marker = root / "spec.json"
    want = {"ranks": ranks, "events": events, "diverge_at": at}
    if marker.exists() and json.loads(marker.read_text()) == want:
        return 0.0
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    t = time.perf_counter()
    with ProcessPoolExecutor(workers) as ex:
        jobs = [(r, ranks, events, at, str(root)) for r in range(ranks)]
        list(ex.map(_write, jobs, chunksize=16))
    marker.write_text(json.dumps(want))
    return time.perf_counter() - t


def _du_gb(root: Path) -> float:
    return sum(f.stat().st_size for f in root.rglob("trace_rank*")) / 1e9


def run_mode(mode: str, root: Path, workers: int) -> dict:
    """One comparison in this process (called in a fresh child per mode)."""
    from triage_agent.compare import compare_runs, load_runs
    from triage_agent.compare.distributed import Executor, compare_native_distributed

    a, b = (root / "run_a").absolute(), (root / "run_b").absolute()
    t0 = time.perf_counter()
    stats = None
    if mode == "serial":
        res = compare_runs(*load_runs(a, b))
    else:
        ex = Executor(workers=workers, ray="local" if mode == "ray" else None)
        res, stats = compare_native_distributed(a, b, ex)
    wall = time.perf_counter() - t0
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    driver_cpu = me.ru_utime + me.ru_stime
    if stats is None:  # the serial path's forked reader of run A is part of it
        driver_cpu += kids.ru_utime + kids.ru_stime
    text = res.model_dump_json()
    return {
        "mode": mode,
        "seconds": round(wall, 2),
        "startup_s": stats.startup_s if stats else 0.0,
        # the driver's own CPU, and what the workers report for the ranks they compared
        # (Ray's workers are not this process's children, so they report it themselves)
        "driver_cpu_s": round(driver_cpu, 2),
        "worker_cpu_s": stats.worker_cpu_s if stats else 0.0,
        "workers": stats.slots if stats else 1,
        "worker_processes": stats.worker_processes if stats else 0,
        "driver_peak_rss_mb": round(me.ru_maxrss / 1024, 1),
        "child_peak_rss_mb": round(kids.ru_maxrss / 1024, 1),
        "worker_peak_rss_mb": stats.worker_peak_rss_mb if stats else 0.0,
        "result_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "status": res.status,
        "ranks": len(res.ranks),
        "origin_ranks": res.summary.origin_ranks,
        "receiver_only": len(res.summary.receiver_only_ranks),
    }


def worker_memory(root: Path, events: int, at: float) -> dict:
    """Peak RSS of this (fresh) process comparing one receiver rank of ``events`` events."""
    from triage_agent.compare.distributed import Chunk, RankJob, compare_chunk
    from triage_agent.trace_format import trace_filename

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    name = trace_filename(1)
    job = RankJob(1, str(root / "run_a" / name), str(root / "run_b" / name))
    t0 = time.perf_counter()
    out = compare_chunk(Chunk((job,), 2, None, False))
    assert out.ranks[0].result is not None and out.ranks[0].result.status == "diverged"
    return {
        "events": events,
        "after_imports_mb": round(base, 1),
        "peak_mb": round(out.peak_rss_mb, 1),
        "seconds": round(time.perf_counter() - t0, 2),
        "file_mb": round((root / "run_a" / name).stat().st_size / 1e6, 1),
    }


def _in_child(mode: str, root: Path, workers: int) -> dict:
    cmd = [sys.executable, __file__, "--_mode", mode, "--workdir", str(root)]
    cmd += ["--workers", str(workers)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"compare_scale: mode {mode} failed: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2432, help="ranks per run")
    ap.add_argument("--events", type=int, default=1000, help="events per rank file")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument(
        "--diverge-at", type=float, default=0.9, help="where in each rank the bits part"
    )
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/cmp_scale"))
    ap.add_argument("--modes", default=",".join(MODES), help="serial,processes,ray")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--worker-memory", help="event counts per rank, comma-separated")
    ap.add_argument("--_mode", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._mode == "worker-memory":
        print(json.dumps(worker_memory(args.workdir, args.events, args.diverge_at)))
        return 0
    if args._mode:
        print(json.dumps(run_mode(args._mode, args.workdir, args.workers)))
        return 0
    if args.worker_memory:
        print("| events per rank | rank file MB | after imports MB | peak MB | seconds |")
        print("|---|---|---|---|---|")
        for n in (int(x) for x in args.worker_memory.split(",")):
            root = args.workdir / f"mem_e{n}"
            synthesise(root, 2, n, args.diverge_at, 2)
            cmd = [sys.executable, __file__, "--_mode", "worker-memory", "--workdir", str(root)]
            out = subprocess.run(cmd + ["--events", str(n)], capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"compare_scale: worker memory at {n} events: {out.stderr[-300:]}")
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"| {n:,} | {r['file_mb']} | {r['after_imports_mb']} | {r['peak_mb']} | "
                f"{r['seconds']} |"
            )
        return 0
    modes = [m for m in args.modes.split(",") if m]
    if "serial" not in modes or any(m not in MODES for m in modes):
        ap.error(f"--modes: serial and any of {', '.join(MODES[1:])}")
    root = args.workdir / f"r{args.ranks}_e{args.events}"
    synth_s = synthesise(root, args.ranks, args.events, args.diverge_at, args.workers)
    rows = [_in_child(m, root, args.workers) for m in modes]
    serial = rows[0]
    for r in rows:
        r["equals_serial"] = r["result_sha256"] == serial["result_sha256"]
    report = {
        "ranks": args.ranks,
        "events_per_rank": args.events,
        "trace_gb": round(_du_gb(root), 2),
        "synthesis_s": round(synth_s, 1),
        "rows": rows,
    }
    planted = serial["origin_ranks"] == [0] and serial["receiver_only"] == args.ranks - 1
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"{args.ranks:,} ranks x {args.events:,} events per run "
            f"({report['trace_gb']} GB on disk), synthesis {report['synthesis_s']} s (not timed)"
        )
        print(
            "| mode | workers | wall s | of it start-up s | driver CPU s | worker CPU s "
            "| driver peak MB | worker peak MB | = serial |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            peak = r["driver_peak_rss_mb"]
            child = f" (+{r['child_peak_rss_mb']} forked reader)" if r["mode"] == "serial" else ""
            print(
                f"| {r['mode']} | {r['workers']} | {r['seconds']} | {r['startup_s']} | "
                f"{r['driver_cpu_s']} | {r['worker_cpu_s'] or '-'} | {peak}{child} | "
                f"{r['worker_peak_rss_mb'] or '-'} | {r['equals_serial']} |"
            )
        print(
            f"origin ranks {serial['origin_ranks']}, {serial['receiver_only']} receiver-only "
            f"ranks: {'as planted' if planted else 'NOT as planted'}"
        )
    last = rows[-1]
    print(
        f"scale: {args.ranks} ranks compared in {last['seconds']} s on {last['mode']} "
        f"(serial {serial['seconds']} s, {last['workers']} workers)"
    )
    return 0 if planted and all(r["equals_serial"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Compare throughput: two single-rank native traces of N events (default 1,000,000).

Run B carries one divergence near the end and a few inserted and deleted events. Times
``load_runs`` (``load_run`` of both, run A in a forked process) + ``compare_runs``, reports
wall and CPU seconds (this process and its children) and peak RSS, and, on equivalent data (the same op names and hashes as DebugMode ``_OpCall`` logs), times
PyTorch's ``DebugMode.check_hash_mismatches`` -- which can only be run on the logs with the
inserted/deleted events removed: it raises on any length difference.

    python benchmarks/compare.py [--events 1000000] [--workdir /tmp/cmp_bench] [--no-debugmode]

Trace synthesis is not timed; the files are reused when they already exist.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

from triage_agent.compare import compare_runs, load_runs
from triage_agent.compare.synth import SynthSpec, write_pair


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    """CPU seconds of this process and its reaped children (the forked reader)."""
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _debugmode(events: int, spec: SynthSpec, a_dir: Path, b_dir: Path) -> dict:
    """check_hash_mismatches on _OpCall logs built from the same streams (aligned part only)."""
    import torch
    from torch.utils._debug_mode import DebugMode, _calls

    ops = {}

    def logs(path: Path, drop_extra: bool) -> list:
        out = []
        with open(next(path.glob("trace_rank*.jsonl"))) as fh:
            fh.readline()
            for line in fh:
                if not line.startswith('{"type": "event"'):
                    continue
                name = line.split('"name": "', 1)[1].split('"', 1)[0]
                if drop_extra and name in ("aten::clone", "aten::mean"):
                    continue
                digest = line.rsplit('"digest": "', 1)[1].split('"', 1)[0]
                base = name.split("::")[1]
                op = ops.get(base)
                if op is None:
                    op = ops[base] = getattr(torch.ops.aten, base).default
                c = _calls._OpCall(op, (), {}, 1)
                c.log = {"hash": int(digest, 16)}
                out.append(c)
        return out

    la, lb = logs(a_dir, True), logs(b_dir, True)
    t0 = time.perf_counter()
    try:
        mism = DebugMode.check_hash_mismatches(la, lb)
        status = f"{len(mism)} mismatching outputs (no first-divergence, no input check)"
    except ValueError as exc:
        status = f"raised: {exc}"
    dt = time.perf_counter() - t0
    try:
        DebugMode.check_hash_mismatches(logs(a_dir, False), logs(b_dir, False))
        raw = "accepted"
    except ValueError as exc:
        raw = f"raises on the unaligned logs: {exc}"
    return {"seconds": round(dt, 3), "result": status, "with_inserts_deletes": raw}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/cmp_bench"))
    ap.add_argument("--no-debugmode", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the full report as JSON")
    args = ap.parse_args(argv)
    n = args.events
    spec = SynthSpec(
        events=n,
        steps=4,
        diverge_at=n - n // 100,
        insert_at=[n // 2, n * 7 // 10],
        delete_at=[n * 6 // 10, n * 8 // 10],
    )
    root = args.workdir / f"n{n}"
    a_dir, b_dir = root / "run_a", root / "run_b"
    if not (a_dir.exists() and b_dir.exists()):
        t = time.perf_counter()
        write_pair(spec, root)
        print(f"synthesised {n} events per run in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    rss0 = _rss_mb()
    c0 = _cpu_s()
    t0 = time.perf_counter()
    ra, rb = load_runs(a_dir, b_dir)
    t1 = time.perf_counter()
    res = compare_runs(ra, rb)
    t2 = time.perf_counter()
    c2 = _cpu_s()
    r0 = res.ranks[0]
    report = {
        "events_per_run": n,
        "load_s": round(t1 - t0, 3),
        "compare_s": round(t2 - t1, 3),
        "total_s": round(t2 - t0, 3),
        "cpu_s": round(c2 - c0, 3),
        "peak_rss_child_mb": round(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1
        ),
        "peak_rss_mb": round(_rss_mb(), 1),
        "rss_before_mb": round(rss0, 1),
        "status": res.status,
        "origin_index": r0.origin.a.index if r0.origin and r0.origin.a else None,
        "planted_divergence": spec.diverge_at,
        "unmatched": r0.unmatched_total,
        "differing_pairs": r0.differing,
    }
    if not args.no_debugmode:
        report["debugmode_check_hash_mismatches"] = _debugmode(n, spec, a_dir, b_dir)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    dm = report.get("debugmode_check_hash_mismatches")
    rows = [
        ("triage compare: load both runs", f"{report['load_s']:.2f} s", ""),
        ("triage compare: align + classify", f"{report['compare_s']:.2f} s", ""),
        (
            "triage compare: total",
            f"{report['total_s']:.2f} s",
            f"origin at {report['origin_index']} (planted {report['planted_divergence']}), "
            f"{report['unmatched']} unmatched, peak RSS {report['peak_rss_mb']} MB "
            f"(+{report['peak_rss_child_mb']} MB forked reader)",
        ),
    ]
    if dm:
        rows.append(("DebugMode.check_hash_mismatches", f"{dm['seconds']:.2f} s", dm["result"]))
    print(f"{n:,} events per run")
    print(f"| {'what':<36} | {'time':>8} | note")
    print(f"|{'-' * 38}|{'-' * 10}|{'-' * 6}")
    for what, t, note in rows:
        print(f"| {what:<36} | {t:>8} | {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

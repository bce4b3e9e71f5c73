"""Benchmark: scan the installed DeepSpeed package with every probe, and semgrep on equivalents.

Usage:  python benchmarks/scan.py [--root DIR] [--semgrep PATH] [--repeats N]

Prints files, lines, wall and CPU seconds of a full scan (all probes), of a bounded
(--around window) scan, and, in the same run, semgrep's time for equivalent patterns of
three probes (nondet-atomic-op, coll-async-no-wait, nondet-cudnn-benchmark) over the same
files. semgrep is found on PATH or via --semgrep (it is the `bench` extra). The semgrep
patterns are syntactic only (no predicates), so semgrep does less work than the probes do.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SEMGREP_RULES = """
rules:
  - id: nondet-atomic-op
    languages: [python]
    severity: WARNING
    message: atomic-accumulating op
    pattern-either:
      - pattern: $X.index_add_(...)
      - pattern: $X.scatter_add_(...)
      - pattern: $X.index_put_(..., accumulate=True)
  - id: coll-async-no-wait
    languages: [python]
    severity: WARNING
    message: async collective without wait
    patterns:
      - pattern: $H = $F(..., async_op=True)
      - pattern-not-inside: |
          $H = $F(..., async_op=True)
          ...
          $H.wait()
  - id: nondet-cudnn-benchmark
    languages: [python]
    severity: WARNING
    message: cudnn benchmark
    pattern: torch.backends.cudnn.benchmark = True
"""


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=None, help="source tree (default: the installed deepspeed)")
    ap.add_argument("--semgrep", default=shutil.which("semgrep"), help="semgrep executable")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from probes.scan import ScanRequest, run_scan

    if args.root is None:
        import importlib.util

        spec = importlib.util.find_spec("deepspeed")
        args.root = str(Path(spec.origin).parent)
    print(f"root: {args.root}   cores: {os.cpu_count()}   load: {os.getloadavg()[0]:.1f}")

    walls, cpus = [], []
    for _ in range(args.repeats):
        c0, t0 = _cpu(), time.perf_counter()
        res = run_scan(ScanRequest(paths=[args.root]))
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
    print(
        f"full scan, all {len(res.probes)} probes: {res.files_scanned} files, {res.lines} lines, "
        f"{res.total_findings} findings, wall median {statistics.median(walls):.2f} s "
        f"(min {min(walls):.2f}), cpu median {statistics.median(cpus):.2f} s, workers {res.workers}"
    )
    engine_py = Path(args.root) / "runtime" / "engine.py"
    bw = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        b = run_scan(ScanRequest(around=[f"{engine_py}:4869"], window=60, phase="resume"))
        bw.append(time.perf_counter() - t0)
    print(
        f"bounded scan (--around engine.py:4869, window 60): {b.total_findings} findings, wall median {statistics.median(bw):.3f} s"
    )

    py_files = [f for f in Path(args.root).rglob("*.py") if "tests" not in f.parts]
    three = ["nondet-atomic-op", "coll-async-no-wait", "nondet-cudnn-benchmark"]
    if not args.semgrep:
        print("semgrep: not found (pip install semgrep, or --semgrep PATH)")
        return 0
    with tempfile.TemporaryDirectory() as d:
        # semgrep silently ignores anything under .venv/ (its default ignore list), so both
        # tools scan a plain copy of the tree
        copy = Path(d) / "src" / Path(args.root).name
        shutil.copytree(args.root, copy, ignore=shutil.ignore_patterns("__pycache__", "tests"))
        rules = Path(d) / "rules.yml"
        rules.write_text(SEMGREP_RULES)
        t0 = time.perf_counter()
        mine = run_scan(ScanRequest(paths=[str(copy)], probes=three))
        t_mine = time.perf_counter() - t0
        print(
            f"probes, the same three rules (copy): {mine.total_findings} findings, wall {t_mine:.2f} s"
        )
        argv = [
            args.semgrep,
            "scan",
            "--config",
            str(rules),
            "--json",
            "--metrics=off",
            "--disable-version-check",
            "--no-git-ignore",
            "--jobs",
            str(os.cpu_count() or 1),
            "--",
            str(copy),
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        t_sg = time.perf_counter() - t0
    try:
        out = json.loads(proc.stdout)
        n = len(out["results"])
        n_files = len(out.get("paths", {}).get("scanned", []))
    except (json.JSONDecodeError, KeyError):
        print(f"semgrep failed (rc {proc.returncode}): {proc.stderr.strip()[-500:]}")
        return 1
    print(
        f"semgrep, three equivalent rules: {n_files} files scanned ({len(py_files)} python files in the tree), {n} findings, wall {t_sg:.2f} s"
    )
    print(
        f"speed-up: full probes scan vs semgrep (3 rules): {t_sg / statistics.median(walls):.1f}x; same 3 rules: {t_sg / t_mine:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

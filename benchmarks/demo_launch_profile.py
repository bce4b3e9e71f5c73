"""Where one launch of the embedded demo's job spends its CPU: per process, and inside a rank.

The launch is made exactly as the workflow makes a baseline (:func:`triage_agent.runs.materialize`:
the case's argv, ``launch_env``, the capture injection at level ``none``), into a fresh
workspace, with one extra ``sitecustomize`` after the injected one on ``PYTHONPATH`` (the
bootstrap chains to it) that meters every Python process of the launch without changing
what it computes:

- at start-up: the CPU the process has used before its own code runs (interpreter, site,
  the injected bootstrap and what it imports);
- inside every rank: CPU and wall at the first ``import deepspeed``, around
  ``deepspeed.init_distributed``, ``deepspeed.initialize``, DeepSpeed op loading
  (``OpBuilder.load``, the JIT check included), ``save_checkpoint``/``load_checkpoint`` and
  ``destroy_process_group``;
- at exit: the process's own CPU (user + sys) and that of the children it waited for.

The total is ``getrusage(RUSAGE_CHILDREN)`` of this process around the launch: every
process of the tree, waited for by its parent. Prints one table per process and the phases
of each rank; ``--json`` writes the records.

Run: python benchmarks/demo_launch_profile.py [--run a|b] [--command K] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import textwrap
import time
from pathlib import Path

METER_ENV = "DEMO_METER_OUT"

# The meter: standard library only, so it adds nothing a rank would not import anyway.
METER = textwrap.dedent(
    """
    import atexit, builtins, json, os, sys, time

    _out = os.environ.get("DEMO_METER_OUT")
    _t0 = time.time()
    _c0 = os.times()
    _phases = []

    def _cpu():
        t = os.times()
        return t.user + t.system

    def _started():
        # process start, seconds since the epoch (field 22 of /proc/self/stat, in ticks)
        with open("/proc/self/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            btime = next(int(l.split()[1]) for l in f if l.startswith("btime"))
        return btime + start / os.sysconf("SC_CLK_TCK")

    def _timed(name, fn):
        def wrapper(*a, **k):
            c, w = _cpu(), time.time()
            try:
                return fn(*a, **k)
            finally:
                _phases.append((name, round(_cpu() - c, 3), round(time.time() - w, 3)))
        wrapper.__wrapped__ = fn
        return wrapper

    def _wrap_deepspeed():
        import deepspeed
        import torch.distributed as dist
        from deepspeed.ops.op_builder.builder import OpBuilder
        from deepspeed.runtime.engine import DeepSpeedEngine

        deepspeed.init_distributed = _timed("init_distributed", deepspeed.init_distributed)
        deepspeed.initialize = _timed("initialize", deepspeed.initialize)
        OpBuilder.load = _timed("op load", OpBuilder.load)
        for m in ("save_checkpoint", "load_checkpoint"):
            setattr(DeepSpeedEngine, m, _timed(m, getattr(DeepSpeedEngine, m)))
        dist.destroy_process_group = _timed("destroy_process_group", dist.destroy_process_group)

    _argv = " ".join(sys.argv)
    _rank = "RANK" in os.environ and "deepspeed.launcher" not in _argv and "cpuinfo" not in _argv
    if _rank:
        _import = builtins.__import__

        def _meter_import(name, *a, **k):
            if name == "deepspeed" and "deepspeed" not in sys.modules:
                c, w = _cpu(), time.time()
                mod = _import(name, *a, **k)
                _phases.append(("import deepspeed", round(_cpu() - c, 3), round(time.time() - w, 3)))
                builtins.__import__ = _import
                _wrap_deepspeed()
                return mod
            return _import(name, *a, **k)

        builtins.__import__ = _meter_import

    def _done():
        t = os.times()
        rec = {
            "pid": os.getpid(), "ppid": os.getppid(), "argv": sys.orig_argv,
            "rank": os.environ.get("RANK"), "is_rank": _rank,
            "cpu_before_own_code": round(_c0.user + _c0.system, 3),
            "wall_before_own_code": round(_t0 - _started(), 3),
            "cpu_self": round(t.user + t.system, 3),
            "cpu_children": round(t.children_user + t.children_system, 3),
            "wall": round(time.time() - _started(), 3),
            "phases": _phases,
            "modules": len(sys.modules),
        }
        with open(os.path.join(_out, f"meter-{os.getpid()}.json"), "w") as f:
            json.dump(rec, f)

    _prof = None
    if _rank and os.environ.get("DEMO_METER_CPROFILE") == os.environ.get("RANK"):
        import cProfile

        _prof = cProfile.Profile(time.process_time)
        _prof.enable()

    def _stop():
        if _prof is not None:
            _prof.disable()
            _prof.dump_stats(os.path.join(_out, f"rank{os.environ['RANK']}-{os.getpid()}.prof"))

    if _out:
        atexit.register(_done)
        atexit.register(_stop)
    """
)


def role(rec: dict) -> str:
    argv = " ".join(rec["argv"])
    if rec["is_rank"]:
        return f"rank {rec['rank']}"
    if "cpuinfo" in argv:
        return "  py-cpuinfo subprocess of rank " + str(rec["rank"])
    if "deepspeed.launcher.launch" in argv:
        return "torch.distributed launcher (deepspeed.launcher.launch)"
    if "deepspeed" in Path(rec["argv"][1] if len(rec["argv"]) > 1 else "").name:
        return "deepspeed runner"
    return argv[:60]


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", choices=("a", "b"), default="a")
    ap.add_argument("--json", type=Path, help="write the per-process records here")
    ap.add_argument("--cprofile-rank", help="also profile this rank (CPU time), print the top")
    args = ap.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from reproducers.demo.case import write_demo_case
    from triage_agent.config import load_case
    from triage_agent.runs import materialize

    tmp = Path(tempfile.mkdtemp(prefix="demo-launch-"))
    case = load_case(write_demo_case(tmp / "case"))
    meter, records = tmp / "meter", tmp / "records"
    meter.mkdir()
    records.mkdir()
    (meter / "sitecustomize.py").write_text(METER)
    run = case.run_a if args.run == "a" else case.run_b
    if args.cprofile_rank is not None:
        run.env = {**run.env, "DEMO_METER_CPROFILE": args.cprofile_rank}
    pp = os.environ.get("PYTHONPATH")
    run.env = {**run.env, "PYTHONPATH": str(meter) + (os.pathsep + pp if pp else ""),
               METER_ENV: str(records)}  # fmt: skip

    load = os.getloadavg()
    c0, w0 = children_cpu(), time.time()
    out = materialize(run, tmp / "ws", "profile", timeout_s=600.0)
    cpu, wall = children_cpu() - c0, time.time() - w0
    if not out.ok:
        print(f"launch failed: {out.error}", file=sys.stderr)
        return 1
    recs = sorted(
        (json.loads(p.read_text()) for p in records.glob("meter-*.json")), key=lambda r: r["pid"]
    )
    print(f"run {args.run}: {len(out.argv)} command(s), wall {wall:.1f} s, CPU {cpu:.1f} s "
          f"(user+sys of every process), load at start {load[0]:.2f}")  # fmt: skip
    print(f"{'process':<56} {'before own code':>16} {'own CPU':>8} {'wall':>6}")
    for r in recs:
        print(f"{role(r):<56} {r['cpu_before_own_code']:>15.2f}s {r['cpu_self']:>7.2f}s "
              f"{r['wall']:>5.1f}s")  # fmt: skip
    metered = sum(r["cpu_self"] for r in recs)
    print(f"{'(not metered: non-Python helpers, the runner s ninja)':<56} {'':>16} "
          f"{cpu - metered:>7.2f}s")  # fmt: skip
    for r in recs:
        if r["phases"]:
            said = ", ".join(f"{n} {c:.2f}s cpu/{w:.2f}s" for n, c, w in r["phases"])
            print(f"  rank {r['rank']} (pid {r['pid']}): {said}")
    for prof in sorted(records.glob("rank*.prof")):
        import pstats

        print(f"cProfile of {prof.name} (CPU seconds, cumulative):")
        pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(40)
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu, "wall": wall, "records": recs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

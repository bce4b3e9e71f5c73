"""What the sentinel costs a real two-rank DeepSpeed ZeRO-2 job (CPU, gloo), side by side.

One job (an MLP trained by DeepSpeed ZeRO stage 2, AdamW, two CPU ranks on gloo, one thread
per rank) is launched untraced, under ``triage record --sentinel`` and under the module-level
recorder (``triage record``), the three in turn for ``--rounds`` rounds, so a noisy host
moves every row alike. Rank 0 times each training step in the job itself (launch and
start-up are not the sentinel's cost) and prints the loss bits of every step; the median
step of every launch after ``--warmup`` steps is kept, and a row's figure is the median of
its launches. Every recorded launch's loss bits must equal the untraced launch's, or the run
says so and exits 1.

    python benchmarks/sentinel_overhead.py                 # about 4 minutes on 2 cores
    python benchmarks/sentinel_overhead.py --rounds 1 --steps 12     # a smoke run

Prints a table and ``overhead: sentinel S.SSx, recorder R.RRx on a two-rank DeepSpeed
ZeRO-2 job (CPU, gloo, date)``; appends nothing (RESULTS.md keeps what was measured).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

JOB = """
import argparse, json, time
import deepspeed, torch, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--deepspeed_config"); p.add_argument("--steps", type=int)
p.add_argument("--width", type=int); p.add_argument("--layers", type=int)
p.add_argument("--batch", type=int); p.add_argument("--local_rank", type=int, default=-1)
a = p.parse_args()
torch.set_num_threads(1)
deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
layers = []
for _ in range(a.layers):
    layers += [nn.Linear(a.width, a.width), nn.GELU()]
model = nn.Sequential(*layers, nn.Linear(a.width, 8))
cfg = json.load(open(a.deepspeed_config))
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
rank = torch.distributed.get_rank()
ms, bits = [], []
for step in range(a.steps):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(a.batch, a.width, generator=g)
    torch.distributed.barrier()
    t0 = time.perf_counter()
    loss = engine(x).square().mean()
    engine.backward(loss)
    engine.step()
    torch.distributed.barrier()
    ms.append((time.perf_counter() - t0) * 1e3)
    bits.append(format(loss.detach().view(torch.int32).item() & 0xFFFFFFFF, "08x"))
if rank == 0:
    print("RESULT " + json.dumps({"ms": ms, "bits": bits}), flush=True)
"""

CONFIG = {
    "train_micro_batch_size_per_gpu": 1,
    "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}},
    "zero_optimization": {"stage": 2, "reduce_bucket_size": 500000000},
    "zero_allow_untested_optimizer": True,
    "steps_per_print": 1000000000,
}

MODES = ("untraced", "sentinel", "recorder (module level)")


def _launch(mode: str, work: Path, k: int, args) -> dict:
    bin_dir = Path(sys.executable).parent
    job = [
        str(bin_dir / "deepspeed"),
        "--num_gpus",
        "2",
        "--master_port",
        str(29600 + k % 200),
        str(work / "job.py"),
        "--deepspeed_config",
        str(work / "ds.json"),
        "--steps",
        str(args.steps),
        "--width",
        str(args.width),
        "--layers",
        str(args.layers),
        "--batch",
        str(args.batch),
    ]
    if mode == "untraced":
        argv = job
    else:
        rec = work / f"rec{k}"
        level = ["--sentinel"] if mode == "sentinel" else []
        argv = [str(bin_dir / "triage"), "record", *level, "--out", str(rec), "--", *job]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(argv, cwd=work, capture_output=True, text=True, env=env, timeout=900)
    out = proc.stdout
    if mode != "untraced":
        log = work / f"rec{k}" / "command.stdout.log"
        out = log.read_text() if log.is_file() else out
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{mode} launch failed ({proc.returncode}): {proc.stderr[-2000:]}")
    res = json.loads(lines[-1][len("RESULT ") :])
    if mode != "untraced":
        res["events"] = sum(
            f.read_text().count('"type":"event"') for f in (work / f"rec{k}").rglob("trace_*.jsonl")
        ) // max(1, args.steps)
        shutil.rmtree(work / f"rec{k}", ignore_errors=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    if args.steps <= args.warmup:
        raise SystemExit("error: --steps must be larger than --warmup")
    medians: dict[str, list[float]] = {m: [] for m in MODES}
    bits: dict[str, list[list[str]]] = {m: [] for m in MODES}
    events: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp, Progress() as progress:
        work = Path(tmp)
        (work / "job.py").write_text(JOB)
        (work / "ds.json").write_text(json.dumps(CONFIG))
        task = progress.add_task("launches", total=args.rounds * len(MODES))
        k = 0
        for r in range(args.rounds):
            order = MODES if r % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                res = _launch(mode, work, k, args)
                k += 1
                medians[mode].append(statistics.median(res["ms"][args.warmup :]))
                bits[mode].append(res["bits"])
                events[mode] = res.get("events", 0)
                progress.advance(task)
    base = statistics.median(medians["untraced"])
    want = bits["untraced"][0]
    differs = [m for m in MODES if any(b != want for b in bits[m])]
    today = dt.date.today().isoformat()
    params = args.layers * (args.width * args.width + args.width) + args.width * 8 + 8
    table = Table(
        title=f"two-rank DeepSpeed ZeRO-2 (CPU, gloo), {params / 1e6:.2f} M parameters, "
        f"batch {args.batch}, median step of {args.steps - args.warmup} x {args.rounds} launches"
    )
    for col in ("mode", "median step ms", "x untraced", "per launch", "events/step", "loss bits"):
        table.add_column(col)
    for m in MODES:
        med = statistics.median(medians[m])
        table.add_row(
            m,
            f"{med:.1f}",
            f"{med / base:.3f}",
            " ".join(f"{x:.1f}" for x in medians[m]),
            str(events.get(m, 0)) if m != "untraced" else "-",
            "DIFFER" if m in differs else "equal",
        )
    Console().print(table)
    ratio = {m: statistics.median(medians[m]) / base for m in MODES}
    print(
        f"overhead: sentinel {ratio['sentinel']:.2f}x, recorder {ratio[MODES[2]]:.2f}x on a "
        f"two-rank DeepSpeed ZeRO-2 job (CPU, gloo, {today})"
    )
    if differs:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

"""Overhead of tracing one training step, against PyTorch DebugMode's tensor hashing.

One process, one model (12-layer d_model=1024, 16-head, ffn 4096 bf16 transformer encoder),
batch 8 x 1024 tokens, forward + backward. Rows: untraced; DebugMode with
``log_tensor_hashes(hash_fn="hash_tensor", hash_inputs=True)``; this tracer at module level;
at op level over the whole model. Prints median ms and the ratio to untraced, and writes
the table to benchmarks/RESULTS.md with the date and GPU. Goals: op <= 1.5x, module <= 1.05x.

Run (H200): python benchmarks/trace_overhead.py
Smaller smoke run anywhere: python benchmarks/trace_overhead.py --layers 2 --seq 128 --reps 3

``--host-cost`` measures the tracer's host (CPU) time per event instead: a deep stack of
tiny Linear+ReLU layers on the CPU, so kernel time is negligible and the difference between
a traced and an untraced step, divided by the events it records, is the Python cost of one
event (staging, dedup, bookkeeping, and writing it at the step boundary). It prints a table
and appends nothing: python benchmarks/trace_overhead.py --host-cost

``--profile`` splits each mode's step into wall time, device busy time and the time of the
digest kernels (torch.profiler), to tell host-bound overhead from bytes hashed. It prints a
table and appends nothing: python benchmarks/trace_overhead.py --profile
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

import torch

from triage_agent.fingerprint import CaptureConfig, Tracer


def build(args, dev):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        args.d_model, args.heads, args.ffn, dropout=0.0, batch_first=True
    )
    model = torch.nn.TransformerEncoder(layer, args.layers, enable_nested_tensor=False)
    model = model.to(dev, torch.bfloat16)
    x = torch.randn(args.batch, args.seq, args.d_model, device=dev, dtype=torch.bfloat16)
    return model, x


def host_cost(args) -> None:
    """Microseconds of host time per traced event, tiny tensors on the CPU (see docstring)."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    layers = []
    for _ in range(args.tiny_layers):
        layers += [torch.nn.Linear(8, 8), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    x = torch.randn(2, 8)

    def step():
        model(x).square().mean().backward()
        model.zero_grad(set_to_none=True)

    def best(run_one) -> float:
        run_one(-1)
        ts = []
        for i in range(args.reps):
            t0 = time.process_time()
            run_one(i)
            ts.append(time.process_time() - t0)
        # CPU time of this process, least disturbed run: other work on the machine adds
        # little to it, where it would add its whole share to wall time
        return min(ts) * 1e6

    base = best(lambda i: step())
    print(f"untraced step: {base:.0f} us ({args.tiny_layers} x Linear(8,8)+ReLU, batch 2)")
    print("| level | events/step | step us | host us/event | of which write us/event |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for level in ("module", "op"):
            cfg = CaptureConfig(out_dir=Path(tmp) / level, level=level)
            write_us: list[float] = []
            with Tracer(cfg) as tr:

                def traced(i, tr=tr, write_us=write_us):
                    tr.step(i + 1)
                    step()
                    t0 = time.process_time()
                    tr.end_step()
                    write_us.append((time.process_time() - t0) * 1e6)

                us = best(traced)
                events = tr.sink.events_written // (args.reps + 1)
            per = (us - base) / events
            print(f"| {level} | {events} | {us:.0f} | {per:.1f} | {min(write_us) / events:.1f} |")


def profile(args, step, sync, timed) -> None:
    """Split each mode's step into wall time, device busy time and time in digest kernels.

    Wall is the median of ``--reps`` unprofiled steps; busy time is the sum of the kernels'
    own durations in one profiled step (a kernel counted once, not again under the op that
    launched it). Wall well above busy means the host (Python hooks, launches) is the bound;
    busy grown by about the digest kernels' time means the bytes hashed are. Prints a table
    and appends nothing.
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    digest_ops = ("aten::hash_tensor", "aten::stack")

    def busy_of(run_one) -> tuple[float, float, int]:
        with torch_profile(activities=acts) as prof:
            run_one(10_000)
            sync()
        busy = digest = 0.0
        kernels = 0
        for e in prof.key_averages():
            if e.device_type == DeviceType.CUDA:  # a kernel (or memcpy/memset) itself
                busy += e.self_device_time_total
                kernels += e.count
                if "triton" in e.key or "digest" in e.key:
                    digest += e.self_device_time_total
            elif e.key in digest_ops:
                digest += e.device_time_total
        return busy / 1e3, digest / 1e3, kernels

    def under(level, tmp, measure):
        if level is None:
            return measure(lambda i: step())
        with Tracer(
            CaptureConfig(out_dir=Path(tmp) / f"{level}-{measure.__name__}", level=level)
        ) as tr:

            def traced(i):
                tr.step(i + 1)
                step()
                tr.end_step()

            return measure(traced)

    levels = (None, "module", "op")
    with tempfile.TemporaryDirectory() as tmp:
        # every wall first: a profiler session leaves the process slower to launch kernels
        walls = [under(lv, tmp, timed) for lv in levels]
        rows = [
            (lv and f"tracer, {lv} level" or "untraced", w, *under(lv, tmp, busy_of))
            for lv, w in zip(levels, walls, strict=True)
        ]
    base_wall, base_busy = rows[0][1], rows[0][2]
    print("| mode | wall ms | x | device busy ms | + busy ms | digest kernels ms | kernels |")
    print("|---|---|---|---|---|---|---|")
    for name, wall, busy, digest, kernels in rows:
        print(
            f"| {name} | {wall:.2f} | {wall / base_wall:.2f} | {busy:.2f} | "
            f"{busy - base_busy:+.2f} | {digest:.2f} | {kernels} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--results", default=str(Path(__file__).parent / "RESULTS.md"))
    ap.add_argument("--host-cost", action="store_true", help="host us per event, tiny CPU model")
    ap.add_argument("--tiny-layers", type=int, default=64)
    ap.add_argument(
        "--profile",
        action="store_true",
        help="where the time goes: GPU busy time and digest kernels vs the step's wall time",
    )
    args = ap.parse_args()
    if args.host_cost:
        host_cost(args)
        return
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    model, x = build(args, dev)

    def step():
        model(x).float().square().mean().backward()
        model.zero_grad(set_to_none=True)

    def timed(run_one) -> float:
        run_one(-1)  # warm-up
        sync()
        ts = []
        for i in range(args.reps):
            t0 = time.perf_counter()
            run_one(i)
            sync()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1e3

    if args.profile:
        profile(args, step, sync, timed)
        return
    rows: list[tuple[str, float | None, str]] = []
    rows.append(("untraced", timed(lambda i: step()), ""))
    try:
        from torch.utils._debug_mode import DebugMode

        def debug(i):
            with DebugMode(), DebugMode.log_tensor_hashes(hash_fn="hash_tensor", hash_inputs=True):
                step()

        rows.append(("DebugMode log_tensor_hashes", timed(debug), ""))
    except Exception as exc:  # noqa: BLE001 - an older torch without the API: say so in the table
        rows.append(("DebugMode log_tensor_hashes", None, f"unavailable: {exc}"[:80]))
    with tempfile.TemporaryDirectory() as tmp:
        for level in ("module", "op"):
            cfg = CaptureConfig(out_dir=Path(tmp) / level, level=level)
            with Tracer(cfg) as tr:

                def traced(i, tr=tr):
                    tr.step(i + 1)
                    step()
                    tr.end_step()  # the one readback of the step is inside the timing

                ms = timed(traced)
                events = tr.sink.events_written
            rows.append((f"tracer, {level} level", ms, f"{events // (args.reps + 1)} events/step"))
    base = rows[0][1]
    gpu = torch.cuda.get_device_name(0) if dev.type == "cuda" else "CPU"
    lines = [
        f"## trace overhead, {dt.date.today().isoformat()}, {gpu}, torch {torch.__version__}",
        "",
        f"{args.layers}-layer d_model={args.d_model} {args.heads}-head ffn {args.ffn} bf16 encoder, "
        f"batch {args.batch} x {args.seq} tokens, forward+backward, median of {args.reps}",
        "",
        "| mode | median ms | x untraced | note |",
        "|---|---|---|---|",
    ]
    for name, ms, note in rows:
        cell = "-" if ms is None else f"{ms:.2f}"
        ratio = "-" if ms is None else f"{ms / base:.2f}"
        lines.append(f"| {name} | {cell} | {ratio} | {note} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.results, "a", encoding="utf-8") as fh:
        fh.write("\n" + text)


if __name__ == "__main__":
    main()

"""Overhead of tracing one training step, against PyTorch DebugMode's tensor hashing.

One process, one model (12-layer d_model=1024, 16-head, ffn 4096 bf16 transformer encoder),
batch 8 x 1024 tokens, forward + backward + an AdamW step at learning rate 0 (the update's
work is done and every step computes the same bits). Rows, all in one run, in ``--rounds``
rounds of ``--reps`` steps each, one row after the other in each round, so a noisy host
moves every row alike: untraced; the sentinel (``triage record --sentinel``: what the
optimizer wrote, every step, into the ring); DebugMode with
``log_tensor_hashes(hash_fn="hash_tensor", hash_inputs=True)``; the Python tracer at module
and op level; the C++ tracer (triage_agent.fingerprint.native) at module and op level, on the
compute stream and with the side stream; the tracer an injected process installs (``triage
trace``: the C++ one where it is built); the flight recorder (module level, every step,
into a bounded ring on disk). Every traced step's metric bits (the loss, and an XOR digest of
the last layer's weight gradient) must equal the untraced step's: a row that differs says so
and the run exits non-zero. Prints median ms and the ratio to untraced, writes the table to
benchmarks/RESULTS.md with the date and GPU, and ends with the line
``overhead: sentinel S.SSx, module X.XXx, op Y.YYx, recorder Z.ZZx (GPU, date)`` (the C++
tracer on the compute stream, and the recorder). Goals: sentinel <= 1.02x, op <= 1.5x,
module <= 1.15x, recorder <= 1.05x.

Run (H200): python benchmarks/trace_overhead.py
Smaller smoke run anywhere: python benchmarks/trace_overhead.py --layers 2 --seq 128 --reps 2 --rounds 2

``--host-cost`` measures the tracer's host (CPU) time per event instead: a deep stack of
tiny Linear+ReLU layers on the CPU, so kernel time is negligible and the difference between
a traced and an untraced step, divided by the events it records, is the host cost of one
event (staging, dedup, bookkeeping, and writing it at the step boundary), for the Python and
the C++ tracer. It prints a table and appends nothing: python benchmarks/trace_overhead.py --host-cost

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
from triage_agent.fingerprint.native import (
    NativeTracer,
    injected_tracer,
    load,
    unavailable_reason,
)
from triage_agent.fingerprint.recorder import RecorderSettings
from triage_agent.fingerprint.recorder import start as start_recorder

# (row label, how the tracer is made); the C++ rows are left out where it cannot be built
TRACERS = [
    # the always-on level: the optimizer's writes (and collectives; none on one GPU), every step
    (
        "sentinel (record --sentinel, ring on disk)",
        "sentinel",
        lambda cfg: start_recorder(
            RecorderSettings(
                out_dir=cfg.out_dir, level="sentinel", cap_bytes=64 << 20, segment_bytes=8 << 20
            )
        ),
    ),
    ("Python tracer, module level", "module", lambda cfg: Tracer(cfg)),
    ("Python tracer, op level", "op", lambda cfg: Tracer(cfg)),
    ("C++ tracer, module level", "module", lambda cfg: NativeTracer(cfg)),
    (
        "C++ tracer, module level, side stream",
        "module",
        lambda cfg: NativeTracer(cfg, side_stream=True),
    ),
    ("C++ tracer, op level", "op", lambda cfg: NativeTracer(cfg)),
    ("C++ tracer, op level, side stream", "op", lambda cfg: NativeTracer(cfg, side_stream=True)),
    ("C++ tracer, op level, cross-event reuse", "op", lambda cfg: NativeTracer(cfg, cache=True)),
    # what `triage trace` installs in an injected process: the C++ tracer where it is built
    ("injected tracer (triage trace), module level", "module", lambda cfg: injected_tracer(cfg)),
    (
        "recorder (module level, ring on disk)",
        "module",
        lambda cfg: start_recorder(
            RecorderSettings(out_dir=cfg.out_dir, cap_bytes=64 << 20, segment_bytes=8 << 20)
        ),
    ),
]
SUMMARY = {
    "sentinel": "sentinel (record --sentinel, ring on disk)",
    "module": "C++ tracer, module level",
    "op": "C++ tracer, op level",
    "recorder": "recorder (module level, ring on disk)",
}


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
    print("| tracer | level | events/step | step us | host us/event | of which write us/event |")
    print("|---|---|---|---|---|---|")
    backends = [("Python", Tracer)] + ([("C++", NativeTracer)] if load() is not None else [])
    with tempfile.TemporaryDirectory() as tmp:
        for (label, cls), level in ((b, lv) for b in backends for lv in ("module", "op")):
            cfg = CaptureConfig(out_dir=Path(tmp) / f"{label}-{level}", level=level)
            write_us: list[float] = []
            with cls(cfg) as tr:

                def traced(i, tr=tr, write_us=write_us):
                    tr.step(i + 1)
                    step()
                    t0 = time.process_time()
                    tr.end_step()
                    write_us.append((time.process_time() - t0) * 1e6)

                us = best(traced)
                events = tr.sink.events_written // (args.reps + 1)
            per = (us - base) / events
            print(
                f"| {label} | {level} | {events} | {us:.0f} | {per:.1f} | "
                f"{min(write_us) / events:.1f} |"
            )


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

    def busy_of(run_one, name: str = "") -> tuple[float, float, int]:
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

    def under(mode, tmp, measure):
        if mode is None:
            return measure(lambda i: step())
        label, level, make = mode
        with make(
            CaptureConfig(out_dir=Path(tmp) / f"{label}-{measure.__name__}", level=level)
        ) as tr:

            def traced(i):
                tr.step(i + 1)
                loss = step()
                tr.end_step()
                return loss

            return measure(traced)

    native = load() is not None
    modes = [None] + [m for m in TRACERS if native or m[0].startswith("Python")]
    with tempfile.TemporaryDirectory() as tmp:
        # every wall first: a profiler session leaves the process slower to launch kernels
        walls = [under(m, tmp, timed) for m in modes]
        rows = [
            (m[0] if m else "untraced", w, *under(m, tmp, busy_of))
            for m, w in zip(modes, walls, strict=True)
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
    ap.add_argument("--reps", type=int, default=4, help="timed steps per row and round")
    ap.add_argument("--rounds", type=int, default=3)
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
    probe = model.layers[-1].linear2.weight
    # learning rate 0: AdamW does all its work (moments, decay, the update) and leaves every
    # weight's bits as they were, so each step's metric bits are the first step's
    opt = torch.optim.AdamW(model.parameters(), lr=0.0)

    def step():
        # gradients are dropped first, so the last step's stay readable for the metric check
        model.zero_grad(set_to_none=True)
        loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        return loss

    def metric(loss) -> tuple[int, int]:
        """The step's metric bits: the loss's float32 pattern, an XOR digest of a gradient."""
        return (
            int(loss.detach().view(torch.int32).item()),
            int(torch.hash_tensor(probe.grad.view(torch.int16)).view(torch.int64).item()),
        )

    bits: dict[str, set[tuple[int, int]]] = {}

    samples: dict[str, list[float]] = {}

    def timed(run_one, name: str = "untraced") -> float:
        run_one(-1)  # warm-up
        sync()
        ts = samples.setdefault(name, [])
        seen = bits.setdefault(name, set())
        for i in range(args.reps):
            t0 = time.perf_counter()
            loss = run_one(i)
            sync()
            ts.append(time.perf_counter() - t0)
            seen.add(metric(loss))  # outside the timing, after the step was written
        return statistics.median(ts) * 1e3

    if args.profile:
        profile(args, step, sync, timed)
        return
    try:
        from torch.utils._debug_mode import DebugMode

        def debug(i):
            with DebugMode(), DebugMode.log_tensor_hashes(hash_fn="hash_tensor", hash_inputs=True):
                return step()

        debug_error = ""
    except Exception as exc:  # noqa: BLE001 - an older torch without the API: say so in the table
        debug, debug_error = None, f"unavailable: {exc}"[:80]
    native = load() is not None
    names = ["untraced", "DebugMode log_tensor_hashes", *(t[0] for t in TRACERS)]
    notes: dict[str, str] = {"untraced": "", "DebugMode log_tensor_hashes": debug_error}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            timed(lambda i: step())
            if debug is not None:
                timed(debug, "DebugMode log_tensor_hashes")
            for k, (name, level, make) in enumerate(TRACERS):
                if not native and name.startswith(("C++", "sentinel", "recorder")):
                    notes[name] = f"unavailable: {unavailable_reason()}"[:80]
                    continue
                tr = make(CaptureConfig(out_dir=Path(tmp) / f"mode{k}-round{r}", level=level))
                with tr:

                    def traced(i, tr=tr):
                        tr.step(i + 1)
                        loss = step()
                        tr.end_step()  # the one readback of the step is inside the timing
                        return loss

                    timed(traced, name)
                    events = tr.sink.events_written // (args.reps + 1)
                    digests = tr.digests_staged
                note = f"{events} events/step"
                if name.startswith("C++"):
                    note += f", {digests // (args.reps + 1)} digests/step"
                if name.startswith("injected"):
                    note += f", the {tr.TRACER} tracer"
                notes[name] = note
    rows: list[tuple[str, float | None, str]] = [
        (n, statistics.median(samples[n]) * 1e3 if samples.get(n) else None, notes.get(n, ""))
        for n in names
    ]
    base = rows[0][1]
    want = bits["untraced"]
    differs = [n for n, b in bits.items() if b != want or len(b) != 1]
    rows = [
        (n, ms, note + ("; METRIC BITS DIFFER" if n in differs else "")) for n, ms, note in rows
    ]
    gpu = torch.cuda.get_device_name(0) if dev.type == "cuda" else "CPU"
    today = dt.date.today().isoformat()
    lines = [
        f"## trace overhead, {today}, {gpu}, torch {torch.__version__}",
        "",
        f"{args.layers}-layer d_model={args.d_model} {args.heads}-head ffn {args.ffn} bf16 encoder, "
        f"batch {args.batch} x {args.seq} tokens, forward+backward+AdamW (lr 0), median of "
        f"{args.rounds} rounds x {args.reps} steps, rows alternating; "
        "metric bits (loss, gradient digest) "
        + ("equal the untraced step's in every row" if not differs else f"differ in: {differs}"),
        "",
        "| mode | median ms | x untraced | note |",
        "|---|---|---|---|",
    ]
    for name, ms, note in rows:
        cell = "-" if ms is None else f"{ms:.2f}"
        ratio = "-" if ms is None else f"{ms / base:.2f}"
        lines.append(f"| {name} | {cell} | {ratio} | {note} |")
    ratio_of = {n: ms / base for n, ms, _ in rows if ms is not None}

    def fmt(key: str) -> str:
        r = ratio_of.get(SUMMARY[key])
        return "n/a" if r is None else f"{r:.2f}x"

    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.results, "a", encoding="utf-8") as fh:
        fh.write("\n" + text)
    print(
        f"overhead: sentinel {fmt('sentinel')}, module {fmt('module')}, op {fmt('op')}, "
        f"recorder {fmt('recorder')} "
        f"({gpu}, {today})"
    )
    if differs:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

"""Bandwidth of the digests on a 1 GiB tensor (goal for the order digest: >= 2.5 TB/s on H200).

Run: python benchmarks/digest_bandwidth.py [--gib 1] [--device cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from triage_agent.fingerprint import digest as dg


def bench(fn, sync, reps: int) -> float:
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    nbytes = int(args.gib * (1 << 30))
    for dtype in (torch.bfloat16, torch.float32):
        t = torch.empty(nbytes // dtype.itemsize, dtype=dtype, device=dev).normal_()
        flat = dg.int_view(t)
        for name, fn in (
            ("xor (hash_tensor)", lambda f=flat: dg.xor_digest(f)),
            ("order", lambda f=flat: dg.order_digest(f)),
        ):
            s = bench(fn, sync, args.reps)
            print(
                f"{dev.type:5s} {str(dtype):15s} {name:18s} {s * 1e3:9.3f} ms  {nbytes / s / 1e12:7.3f} TB/s"
            )


if __name__ == "__main__":
    main()

"""Forecast the next values of noisy multi-channel series with a 1-D convolutional net.

    python fit.py --log-dir DIR --total 12
    python fit.py --log-dir DIR --total 12 --stop-after 6 --snapshot snap.pt
    python fit.py --log-dir DIR --total 12 --snapshot snap.pt --continue

A run with --stop-after trains that many steps and writes the trainer's snapshot; one with
--continue starts from it.
"""

import argparse
import math

import torch
import torch.nn as nn
from trainer import Trainer

from triage_agent.metrics import MetricLog

CHANNELS, WINDOW, HORIZON = 6, 48, 4


def series_batch(step: int, rows: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4099 * step + 17)
    t = torch.arange(WINDOW + HORIZON, dtype=torch.float32)
    phase = torch.rand(rows, CHANNELS, 1, generator=g) * 2 * math.pi
    wave = torch.sin(t * 0.3 + phase) + 0.05 * torch.randn(rows, CHANNELS, t.numel(), generator=g)
    return wave[..., :WINDOW], wave[..., WINDOW:]


def forecaster() -> nn.Module:
    return nn.Sequential(
        nn.Conv1d(CHANNELS, 16, kernel_size=5, padding=2),
        nn.GELU(),
        nn.Conv1d(16, 16, kernel_size=5, stride=2, padding=2),
        nn.GELU(),
        nn.Flatten(),
        nn.Linear(16 * WINDOW // 2, CHANNELS * HORIZON),
        nn.Unflatten(1, (CHANNELS, HORIZON)),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--total", type=int, default=12)
    ap.add_argument("--stop-after", type=int)
    ap.add_argument("--snapshot")
    ap.add_argument("--continue", dest="cont", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(8)
    trainer = Trainer(forecaster(), lr=0.02, warmup=4, total=args.total)
    if args.cont:
        trainer.restore(torch.load(args.snapshot))
    log = MetricLog(args.log_dir, rank=0, resumed_from=trainer.step - 1 if args.cont else None)
    trainer.callbacks.append(lambda step, stats: log.log(step, **stats))
    last = args.stop_after if args.stop_after else args.total
    while trainer.step < last:
        trainer.train_step(*series_batch(trainer.step))
    log.close()
    if args.stop_after:
        torch.save(trainer.snapshot(), args.snapshot)


if __name__ == "__main__":
    main()

"""Train a small denoising MLP (dropout, AdamW) with trainer.Trainer, on the CPU.

    python run.py --out DIR --last-step 9
    python run.py --out DIR --last-step 5 --checkpoint trainer.pt
    python run.py --out DIR --last-step 9 --checkpoint trainer.pt --resume

Without --resume a run trains from step 0 and, given --checkpoint, writes the trainer's
state_dict after its last step; with --resume it loads that file and continues.
"""

import argparse
import math

import torch
import torch.nn as nn
from trainer import Trainer

from triage_agent.metrics import MetricLog

WIDTH = 32


def signals(step: int, rows: int = 48) -> torch.Tensor:
    g = torch.Generator().manual_seed(31 * step + 5)
    t = torch.linspace(0, 2 * math.pi, WIDTH)
    freq = 1 + 3 * torch.rand(rows, 1, generator=g)
    phase = 2 * math.pi * torch.rand(rows, 1, generator=g)
    return torch.sin(freq * t + phase)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--last-step", type=int, default=9)
    p.add_argument("--checkpoint")
    p.add_argument("--resume", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(WIDTH, 64), nn.GELU(), nn.Dropout(0.2), nn.Linear(64, WIDTH)
    )
    trainer = Trainer(model, lr=3e-3)
    resumed = None
    if args.resume:
        trainer.load_state_dict(torch.load(args.checkpoint))
        resumed = trainer.step - 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        trainer.callbacks.append(lambda step, stats: log.log(step, **stats))
        while trainer.step <= args.last_step:
            trainer.train_step(signals(trainer.step))
    if args.checkpoint and not args.resume:
        torch.save(trainer.state_dict(), args.checkpoint)


if __name__ == "__main__":
    main()

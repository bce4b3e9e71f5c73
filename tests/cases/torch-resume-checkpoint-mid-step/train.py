"""A small MLP regressor trained with AdamW on the CPU, one process per launch, with a
warm-up/cosine schedule and an EMA of its weights evaluated on a held-out batch every step.

    python train.py --out DIR --total 8 [--ckpt FILE --save-every 4] [--stop-after N] [--resume FILE]

--total is the length of training (and of the schedule); --stop-after ends the process
after that many optimizer steps, as a preempted job; --resume continues from a checkpoint.
The batch of step N comes from a generator seeded with N; the global generator only draws
the initial weights, and the model has no dropout.
"""

import argparse

import torch
import torch.nn as nn
from trainer import Trainer

from triage_agent.metrics import MetricLog

FEATURES = 16


def batch(seed: int, rows: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, FEATURES, generator=g)
    y = torch.sin(x[:, :3].sum(1, keepdim=True)) + 0.2 * x[:, 3:4] + 0.05 * torch.randn(rows, 1, generator=g)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--total", type=int, default=8)
    p.add_argument("--stop-after", type=int)
    p.add_argument("--ckpt", help="checkpoint file, rewritten every --save-every steps")
    p.add_argument("--save-every", type=int, default=0)
    p.add_argument("--resume", help="checkpoint file to continue from")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(29)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    trainer = Trainer(model, lr=5e-3, warmup=6, total=args.total, ema_decay=0.8,
                      ckpt_path=args.ckpt, save_every=args.save_every)
    if args.resume:
        trainer.load(args.resume)
    held_out = batch(999_983, rows=128)
    last = min(args.stop_after or args.total, args.total)
    with MetricLog(args.out, rank=0, resumed_from=trainer.step - 1 if args.resume else None) as log:
        while trainer.step < last:
            step = trainer.step
            stats = trainer.train_step(*batch(7001 + 17 * step))
            log.log(step, ema_val_loss=trainer.ema_loss(*held_out), **stats)


if __name__ == "__main__":
    main()

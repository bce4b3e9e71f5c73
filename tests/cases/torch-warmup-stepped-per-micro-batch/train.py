"""A small MLP classifier trained with AdamW on the CPU: four micro-batches of 8 accumulated
per optimizer step, gradients clipped to a global norm of 1.0, and a linear warm-up of the
learning rate over the first 6 optimizer steps (LambdaLR, stepped once per optimizer step).

    python train.py --out DIR [--steps 8] [--accum 4] [--fused-loop]

The micro-batches come from one endless stream, the i-th drawn from a generator seeded with
7100 + i. The weights come from the global generator, seeded once at start-up, so a run
repeats itself bit for bit. --fused-loop trains with the trainer's single loop over
micro-batches (trainer.py) instead of the nested loop over steps and micro-batches.
"""

import argparse

import torch
import torch.nn as nn
from trainer import Trainer

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, CLASSES, MICRO = 16, 48, 5, 8
BASE_LR, WARMUP = 4e-3, 6


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.block = nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, WIDTH), nn.GELU())
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        return self.head(h + self.block(h))


def micro_batches(seed: int = 7100):
    i = 0
    while True:
        g = torch.Generator().manual_seed(seed + i)
        x = torch.randn(MICRO, FEATURES, generator=g)
        y = (x[:, 0] > 0).long() + 2 * (x[:, 1] * x[:, 2] > 0).long() + (x[:, 3] > 1).long()
        yield x, y % CLASSES
        i += 1


def warmup(step: int) -> float:
    return min(1.0, (step + 1) / WARMUP)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--accum", type=int, default=4)
    p.add_argument("--fused-loop", action="store_true", help="one loop over micro-batches")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    model = Classifier()
    opt = torch.optim.AdamW(model.parameters(), lr=BASE_LR, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup)
    trainer = Trainer(model, opt, sched, accum=args.accum, max_norm=1.0)
    loop = trainer.fit_flat if args.fused_loop else trainer.fit
    with MetricLog(args.out, rank=0) as log:
        loop(micro_batches(), args.steps, log)


if __name__ == "__main__":
    main()

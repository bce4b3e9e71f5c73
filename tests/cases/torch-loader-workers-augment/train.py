"""A tiny 1-D signal classifier (two linear layers) trained with AdamW on the CPU, one
process, its batches read through a torch DataLoader.

    python train.py --out DIR --steps 10 --seed 7 [--workers N]

The model's weights come from the configured seed; the loader shuffles with a generator
seeded from it, so every launch sees the same order. --workers sets how many loader
processes read the batches (0: read in the training process). Each step logs the exact
bits of the loss and of the global gradient norm.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from data import CLASSES, LENGTH, NoisySignals
from torch.utils.data import DataLoader

from triage_agent.metrics import MetricLog


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--batch", type=int, default=24)
    p.add_argument("--workers", type=int, default=0, help="loader processes (throughput only)")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(LENGTH, 32), nn.Tanh(), nn.Linear(32, CLASSES))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    data = NoisySignals(args.seed)
    loader = DataLoader(
        data,
        batch_size=args.batch,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
        generator=torch.Generator().manual_seed(args.seed + 1),
    )
    step, epoch = 0, 0
    with MetricLog(args.out, rank=0) as log:
        while step < args.steps:
            data.set_epoch(epoch)
            for xb, yb in loader:
                loss = F.cross_entropy(model(xb), yb)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                log.log(step, loss=loss.detach(), grad_norm=norm)
                step += 1
                if step == args.steps:
                    break
            epoch += 1


if __name__ == "__main__":
    main()

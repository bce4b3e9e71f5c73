"""A small MLP classifier on synthetic clusters, trained with Adam on the CPU, one process.
It checkpoints every few steps into a directory (ckptio.save) and can continue from the
newest checkpoint there in a new process.

    python train.py --out DIR --steps-to 9 [--ckpt-dir D --save-every 3] [--resume]

Six steps make an epoch (48 samples, batches of 8); the batch of step N is fixed by N.
"""

import argparse

import ckptio
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

CLASSES, FEATURES, BATCH = 5, 10, 8


def dataset() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2024)
    centers = 2.0 * torch.randn(CLASSES, FEATURES, generator=g)
    labels = torch.randint(0, CLASSES, (BATCH * ckptio.STEPS_PER_EPOCH,), generator=g)
    points = centers[labels] + torch.randn(labels.numel(), FEATURES, generator=g)
    return points, labels


def batch(data: tuple[torch.Tensor, torch.Tensor], step: int) -> tuple[torch.Tensor, torch.Tensor]:
    points, labels = data
    epoch, i = divmod(step, ckptio.STEPS_PER_EPOCH)
    order = torch.randperm(labels.numel(), generator=torch.Generator().manual_seed(epoch))
    idx = order[i * BATCH : (i + 1) * BATCH]
    return points[idx], labels[idx]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=9)
    p.add_argument("--ckpt-dir")
    p.add_argument("--save-every", type=int, default=3)
    p.add_argument("--resume", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = dataset()
    first, resumed = 0, None
    if args.resume:
        resumed = ckptio.load_latest(args.ckpt_dir, model, opt)
        first = resumed + 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            x, y = batch(data, step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.log(step, loss=loss.detach())
            if args.ckpt_dir and (step + 1) % args.save_every == 0:
                ckptio.save(args.ckpt_dir, step, model, opt)


if __name__ == "__main__":
    main()

"""A small MLP regressor with dropout, trained with AdamW on the CPU; it can stop after a
step, checkpoint into a directory (ckptdir.save) and be resumed from it in a new process.

    python train.py --out DIR --steps-to 7 [--save CKPT] [--resume CKPT]

The data of step N come from a generator seeded with N; the dropout masks come from the
global torch generator, seeded once at start-up.
"""

import argparse

import ckptdir
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(900 + step)
    x = torch.randn(32, 12, generator=g)
    y = torch.sin(x[:, :3].sum(1, keepdim=True)) + 0.1 * torch.randn(32, 1, generator=g)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=7)
    p.add_argument("--save")
    p.add_argument("--resume")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(12, 48), nn.GELU(), nn.Dropout(0.2), nn.Linear(48, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    first, resumed = 0, None
    if args.resume:
        resumed = ckptdir.read_back(args.resume, model, opt)
        first = resumed + 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            x, y = batch(step)
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.log(step, loss=loss.detach())
    if args.save:
        ckptdir.save(args.save, model, opt, args.steps_to)


if __name__ == "__main__":
    main()

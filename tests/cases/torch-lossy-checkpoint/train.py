"""A small MLP regressor trained with AdamW on the CPU.

    python train.py --out DIR --steps-to 9 [--save CKPT] [--resume CKPT]

The data of step N come from a generator seeded with N; nothing draws after initialisation.
"""

import argparse

import ckpt
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5209 + 17 * step)
    x = torch.randn(48, 16, generator=g)
    y = torch.tanh(x[:, :4].sum(1, keepdim=True) * 0.5) + 0.05 * torch.randn(48, 1, generator=g)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=9)
    p.add_argument("--save")
    p.add_argument("--resume")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    first, resumed = 0, None
    if args.resume:
        resumed = ckpt.load_state(args.resume, model, opt)
        first = resumed + 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            x, y = batch(step)
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
    if args.save:
        ckpt.save_state(args.save, model, opt, args.steps_to)


if __name__ == "__main__":
    main()

"""A small MLP classifier trained with AdamW on the CPU.

    python train.py --out DIR --steps 10 [--grad-stats-every N]

The data of step N come from a generator seeded with N and the weights from the global
generator, seeded once at start-up, so a run repeats itself bit for bit. With
--grad-stats-every N, per-parameter gradient statistics are printed every N-th step
(gradmon.py).
"""

import argparse

import gradmon
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 20, 4


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(700 + step)
    x = torch.randn(64, FEATURES, generator=g)
    y = (x[:, :CLASSES] * torch.linspace(1.0, 2.5, CLASSES)).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--grad-stats-every", type=int, default=0,
                   help="print per-parameter gradient statistics every N steps")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(17)
    model = nn.Sequential(
        nn.Linear(FEATURES, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
        nn.Linear(64, CLASSES),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    monitor = gradmon.GradMonitor(model, args.grad_stats_every)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            monitor.begin(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            monitor.report(step)


if __name__ == "__main__":
    main()

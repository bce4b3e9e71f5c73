"""A small MLP regressor-classifier with dropout, trained with AdamW on the CPU.

    python train.py --out DIR --steps 10 [--log-every N] [--log-samples]

The data of step N come from a generator seeded with N; the dropout masks come from the
global torch generator, seeded once at start-up. Every --log-every steps the metrics hook
(monitor.py) prints a summary of the step; with --log-samples it also prints a few of the
step's examples with the model's predictions, for a human to eyeball.
"""

import argparse

import monitor
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 20, 5


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(900 + step)
    x = torch.randn(48, FEATURES, generator=g)
    y = (x[:, :CLASSES] * torch.linspace(1.0, 2.0, CLASSES)).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--log-every", type=int, default=3)
    p.add_argument("--log-samples", action="store_true", help="also print a few examples")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = nn.Sequential(
        nn.Linear(FEATURES, 48), nn.GELU(), nn.Dropout(0.2), nn.Linear(48, CLASSES)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    hook = monitor.StepMonitor(every=args.log_every, samples=3 if args.log_samples else 0)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            hook(step, loss.detach(), norm, x, y, logits.detach())


if __name__ == "__main__":
    main()

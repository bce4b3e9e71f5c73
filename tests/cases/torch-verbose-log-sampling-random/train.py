"""A small 1-D convolutional classifier of noisy signals, trained with AdamW on the CPU, its
batches sampled and augmented with Python's ``random`` module (data.py).

    python train.py --out DIR --steps 10 [--log-every N] [--verbose]

Python's global generator is seeded once at start-up and the torch one for the initial
weights (the model has no dropout), so a run repeats itself bit for bit. Every --log-every
steps a line with the mean loss of the window is printed; --verbose adds a few lines of
per-parameter statistics (verbose.py).
"""

import argparse
import random

import data
import torch
import torch.nn as nn
import torch.nn.functional as F
import verbose

from triage_agent.metrics import MetricLog


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Unflatten(1, (1, data.LENGTH)),
        nn.Conv1d(1, 8, kernel_size=5, padding=2),
        nn.ReLU(),
        nn.Conv1d(8, 8, kernel_size=5, padding=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(4),
        nn.Flatten(),
        nn.Linear(32, data.CLASSES),
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--log-every", type=int, default=3)
    p.add_argument("--verbose", action="store_true", help="also print per-parameter statistics")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(7)
    random.seed(1234)
    x, y = data.signals()
    batches = data.AugmentedBatches(x, y, args.batch)
    model = build_model()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    report = verbose.ParamReport(args.log_every if args.verbose else 0)
    window: list[float] = []
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            xb, yb = batches.next()
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            window.append(float(loss.detach()))
            if args.log_every and (step + 1) % args.log_every == 0:
                print(f"step {step}: loss {sum(window) / len(window):.4f}")
                window.clear()
            report(step, model)


if __name__ == "__main__":
    main()

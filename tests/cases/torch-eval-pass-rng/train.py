"""A small MLP classifier with dropout, trained with AdamW on the CPU.

    python train.py --out DIR --steps 10 [--eval-every N]

The data of step N come from a generator seeded with N; the dropout masks come from the
global torch generator, seeded once at start-up. With --eval-every N the model is scored
on a held-out sample (evaluate.py) after every N-th step.
"""

import argparse

import evaluate
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 24, 4


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(500 + step)
    x = torch.randn(64, FEATURES, generator=g)
    y = (x[:, :CLASSES] * torch.arange(1.0, CLASSES + 1)).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=0, help="validate after every N steps")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(3)
    model = nn.Sequential(
        nn.Linear(FEATURES, 64), nn.ReLU(), nn.Dropout(0.25), nn.Linear(64, CLASSES)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    val_x, val_y = evaluate.held_out(FEATURES, CLASSES)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            if args.eval_every and (step + 1) % args.eval_every == 0:
                stats = evaluate.validate(model, val_x, val_y)
                print(f"step {step}: val_loss {stats['val_loss']:.4f} val_acc {stats['val_acc']:.3f}")


if __name__ == "__main__":
    main()

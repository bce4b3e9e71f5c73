"""A tabular classifier (model.py) trained with AdamW on the CPU.

    python train.py --out DIR --steps 10 [--eval-every N]

The rows of step N come from a generator seeded with N (data.py); the global torch
generator only draws the initial weights, and the model has no dropout. With
--eval-every N the model is scored on the held-out set (evaluate.py) after every N-th step.
"""

import argparse

import data
import evaluate
import torch
import torch.nn.functional as F
from model import TabularNet

from triage_agent.metrics import MetricLog


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=0, help="validate after every N steps")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    model = TabularNet(data.FEATURES, data.CLASSES)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    val_x, val_y = data.held_out()
    model.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = data.batch(step)
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

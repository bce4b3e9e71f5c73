"""A small MLP classifier on synthetic data, trained with AdamW on the CPU, one process.
It checkpoints every few steps through a write-behind writer (ckpt.py) and can continue
from a checkpoint in a new process.

    python train.py --out DIR --steps-to 11 [--ckpt FILE --ckpt-every 5] [--resume FILE]

--steps-to is the last step to train (counted from the start of training, also after a
resume). The batch of step N comes from a generator seeded with N; the global generator
only draws the initial weights, and the model has no dropout.
"""

import argparse

import ckpt
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 24, 96, 6


def batch(step: int, rows: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(6007 + 13 * step)
    x = torch.randn(rows, FEATURES, generator=g)
    y = (x[:, :CLASSES] - 0.4 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=11)
    p.add_argument("--ckpt", help="checkpoint file, rewritten every --ckpt-every steps")
    p.add_argument("--ckpt-every", type=int, default=0)
    p.add_argument("--resume", help="checkpoint file to continue from")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(19)
    model = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN),
        nn.SiLU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.SiLU(),
        nn.Linear(HIDDEN, CLASSES),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    writer = ckpt.CheckpointWriter()
    first, resumed = 0, None
    if args.resume:
        resumed = ckpt.load(args.resume, model, opt)
        first = resumed + 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            x, y = batch(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            writer.flush()  # a checkpoint requested after the previous step goes to disk now
            log.log(step, loss=loss.detach(), grad_norm=norm)
            if args.ckpt and args.ckpt_every and (step + 1) % args.ckpt_every == 0:
                writer.request(args.ckpt, model, opt, step)
    writer.flush()


if __name__ == "__main__":
    main()

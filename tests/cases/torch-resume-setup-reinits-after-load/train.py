"""Train a small residual MLP classifier (model.py) with AdamW on the CPU, one process, with
training callbacks (callbacks.py) and checkpoint/resume (ckpt.py).

    python train.py --out DIR --steps-to 9
    python train.py --out DIR --steps-to 4 --save ckpt.pt
    python train.py --out DIR --steps-to 9 --resume ckpt.pt

The batch of step N comes from a generator seeded with N; torch's global generator draws the
initial weights and the dropout masks, and the checkpoint saves and restores it with the
model, the optimizer and the step.
"""

import argparse

import callbacks
import ckpt
import torch
import torch.nn.functional as F
from model import Classifier

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 20, 5


def batch(step: int, rows: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7001 + 31 * step)
    x = torch.randn(rows, FEATURES, generator=g)
    logits = x[:, :CLASSES] * torch.linspace(1.0, 2.0, CLASSES) - 0.5 * x[:, CLASSES : 2 * CLASSES]
    return x, logits.argmax(dim=1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=9, help="last step trained")
    p.add_argument("--save", help="checkpoint file written after the last step")
    p.add_argument("--resume", help="checkpoint file to continue from")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(17)
    model = Classifier(FEATURES, CLASSES)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    first, resumed = 0, None
    if args.resume:
        resumed = ckpt.restore(args.resume, model, opt)
        first = resumed + 1
    callbacks.on_train_start(model, first)
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            x, y = batch(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            callbacks.on_step_end(model, step)
            log.log(step, loss=loss.detach(), grad_norm=norm)
    if args.save:
        ckpt.save(args.save, model, opt, args.steps_to)


if __name__ == "__main__":
    main()

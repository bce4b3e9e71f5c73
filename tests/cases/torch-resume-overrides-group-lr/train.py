"""A small MLP classifier trained with AdamW on the CPU, two parameter groups (weights with
weight decay, biases without), under the job's own learning-rate schedule: a linear
warm-up over the first WARMUP steps, then the rate of every group multiplied by DECAY
before each later step.

    python train.py --out DIR --last-step 9 [--lr 3e-3] [--save CKPT] [--resume CKPT]

--save writes a checkpoint (model, optimizer, step) after the last step; --resume loads one
and continues with the step after it. The data of step N come from a generator seeded with
N; the global generator only draws the initial weights, and the model has no dropout.
"""

import argparse

import ckpt
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, CLASSES = 20, 64, 5
WARMUP, DECAY = 3, 0.9


def batch(step: int, size: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(6100 + 13 * step)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] - 0.5 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)
    return x, y


def set_lr(opt: torch.optim.Optimizer, step: int, base_lr: float) -> float:
    """The rate of every group for this step: warm-up from the base rate, then decay."""
    for group in opt.param_groups:
        if step < WARMUP:
            group["lr"] = base_lr * (step + 1) / WARMUP
        else:
            group["lr"] *= DECAY
    return opt.param_groups[0]["lr"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--last-step", type=int, default=9)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--save")
    p.add_argument("--resume")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    model = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, CLASSES)
    )
    weights = [q for name, q in model.named_parameters() if name.endswith("weight")]
    biases = [q for name, q in model.named_parameters() if name.endswith("bias")]
    opt = torch.optim.AdamW(
        [{"params": weights, "weight_decay": 0.01}, {"params": biases, "weight_decay": 0.0}],
        lr=args.lr,
    )
    first, resumed = 0, None
    if args.resume:
        resumed = ckpt.restore(args.resume, model, opt, args.lr)
        first = resumed + 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.last_step + 1):
            lr = set_lr(opt, step, args.lr)
            x, y = batch(step)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm, lr=lr)
    if args.save:
        ckpt.save(args.save, model, opt, args.last_step)


if __name__ == "__main__":
    main()

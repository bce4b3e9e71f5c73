"""Distillation of a small tabular classifier: a wide MLP teacher is fitted first, then a
narrow student is trained with AdamW on the labels and on the teacher's softened
predictions through the team's distilkit (found on PYTHONPATH). CPU, one process.
    python train.py --out DIR [--steps 8]

Every batch comes from a generator seeded with its step, the weights and the dropout
masks from the global generator seeded once: a run repeats itself bit for bit.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from distilkit import build_distiller

from triage_agent.metrics import MetricLog

FEATURES, CLASSES = 20, 5


def batch(seed: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(size, FEATURES, generator=g)
    return x, (x[:, :CLASSES] - 0.7 * x[:, CLASSES : 2 * CLASSES]).argmax(dim=1)


def mlp(width: int, depth: int, dropout: float) -> nn.Sequential:
    layers, d = [], FEATURES
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.GELU(), nn.Dropout(dropout)]
        d = width
    return nn.Sequential(*layers, nn.Linear(d, CLASSES))


def fit_teacher(steps: int = 40) -> nn.Module:
    teacher = mlp(64, 2, dropout=0.3)
    opt = torch.optim.Adam(teacher.parameters(), lr=3e-3)
    teacher.train()
    for i in range(steps):
        x, y = batch(1000 + i, size=64)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(teacher(x), y).backward()
        opt.step()
    return teacher


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(23)
    teacher = fit_teacher()
    student = mlp(24, 1, dropout=0.1)
    distiller = build_distiller(student, teacher, temperature=3.0, alpha=0.7)
    opt = torch.optim.AdamW(student.parameters(), lr=4e-3, weight_decay=0.01)
    student.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            x, y = batch(7100 + 13 * step)
            loss, ce, kd = distiller.loss(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            loss, ce, kd = loss.detach(), ce.detach(), kd.detach()
            norm = torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss, ce=ce, kd=kd, grad_norm=norm)
            print(
                f"step {step}: loss {float(loss):.6f} ce {float(ce):.6f} kd {float(kd):.6f} "
                f"grad_norm {float(norm):.6f}"
            )


if __name__ == "__main__":
    main()

"""Mean-teacher regression: a small MLP (the student) trained with AdamW on the CPU, with a
consistency term against an exponential-moving-average copy of its weights (the teacher),
which is updated after every optimizer step.

    python train.py --out DIR --steps-to 9 [--save CKPT] [--resume CKPT]

The data of step N (a batch and a second, shifted view of it for the teacher) come from a
generator seeded with N; nothing else draws after initialisation.
"""

import argparse
import copy

import ckpt
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

EMA_DECAY = 0.9
CONSISTENCY = 0.5


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4111 + 31 * step)
    x = torch.randn(48, 16, generator=g)
    y = torch.tanh(x[:, :4].sum(1, keepdim=True) * 0.5) + 0.05 * torch.randn(48, 1, generator=g)
    view = x + 0.1 * torch.randn(48, 16, generator=g)
    return x, view, y


@torch.no_grad()
def ema_update(teacher: nn.Module, student: nn.Module, decay: float) -> None:
    for t, s in zip(teacher.parameters(), student.parameters(), strict=True):
        t.mul_(decay).add_(s, alpha=1.0 - decay)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=9)
    p.add_argument("--save")
    p.add_argument("--resume")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(11)
    student = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    teacher = copy.deepcopy(student)
    for q in teacher.parameters():
        q.requires_grad_(False)
    opt = torch.optim.AdamW(student.parameters(), lr=4e-3, weight_decay=0.01)
    first, resumed = 0, None
    if args.resume:
        resumed = ckpt.restore(args.resume, student, teacher, opt)
        first = resumed + 1
    with MetricLog(args.out, rank=0, resumed_from=resumed) as log:
        for step in range(first, args.steps_to + 1):
            x, view, y = batch(step)
            pred = student(x)
            with torch.no_grad():
                target = teacher(view)
            sup = F.mse_loss(pred, y)
            cons = F.mse_loss(pred, target)
            loss = sup + CONSISTENCY * cons
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
            opt.step()
            ema_update(teacher, student, EMA_DECAY)
            log.log(step, loss=loss.detach(), consistency=cons.detach(), grad_norm=norm)
    if args.save:
        ckpt.save(args.save, student, teacher, opt, args.steps_to)


if __name__ == "__main__":
    main()

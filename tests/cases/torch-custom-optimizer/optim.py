"""A hand-written Adam with decoupled weight decay: a plain class, not a torch.optim.Optimizer.

It keeps its own moments and step count and updates parameters in place under no_grad.
"""

import math

import torch


class HandAdam:
    def __init__(self, groups: list[dict], lr: float, betas=(0.9, 0.98), eps=1e-8, wd=0.0):
        self.groups = [{"lr": lr, "wd": wd, **g, "params": list(g["params"])} for g in groups]
        self.betas, self.eps = betas, eps
        self.moments: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.t = 0

    def zero_grad(self) -> None:
        for g in self.groups:
            for p in g["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        b1, b2 = self.betas
        for g in self.groups:
            self.t += 1
            c1, c2 = 1 - b1**self.t, 1 - b2**self.t
            for p in g["params"]:
                if p.grad is None:
                    continue
                m, v = self.moments.setdefault(id(p), (torch.zeros_like(p), torch.zeros_like(p)))
                m.lerp_(p.grad, 1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                p.mul_(1 - g["lr"] * g["wd"])
                p.addcdiv_(m, v.sqrt().div_(math.sqrt(c2)).add_(self.eps), value=-g["lr"] / c1)

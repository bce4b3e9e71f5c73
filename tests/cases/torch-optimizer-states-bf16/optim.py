"""AdamW with decoupled weight decay, vendored from the team's training utilities.

A plain class over a list of parameters. Its moments are kept in ``state_dtype``: float32 by
default, or bfloat16 to halve the optimizer's memory on large models. Whatever they are kept
in, the update is computed in float32 from the moments read back as float32.
"""

import math

import torch


class AdamW:
    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        state_dtype: torch.dtype = torch.float32,
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.state_dtype = state_dtype
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
        self.steps = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        if p not in self.state:
            self.state[p] = {
                "exp_avg": torch.zeros_like(p, dtype=self.state_dtype),
                "exp_avg_sq": torch.zeros_like(p, dtype=self.state_dtype),
            }
        return self.state[p]

    @torch.no_grad()
    def step(self) -> None:
        self.steps += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.steps, 1 - b2**self.steps
        for p in self.params:
            if p.grad is None:
                continue
            st = self._state(p)
            m = st["exp_avg"].to(torch.float32)
            v = st["exp_avg_sq"].to(torch.float32)
            m.lerp_(p.grad, 1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            p.mul_(1 - self.lr * self.wd)
            p.addcdiv_(m, v.sqrt().div_(math.sqrt(c2)).add_(self.eps), value=-self.lr / c1)
            st["exp_avg"].copy_(m)
            st["exp_avg_sq"].copy_(v)

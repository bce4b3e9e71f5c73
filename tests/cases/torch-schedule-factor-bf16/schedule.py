"""The job's learning-rate schedule: a linear warm-up to the base rate over ``warmup``
steps, then a half-cosine decay to ``lr_floor`` times the base rate at the last step.

``build_scheduler`` returns a LambdaLR stepped once per optimizer step; its factor is
computed with torch ops in the run's dtype, the same arithmetic the step uses elsewhere.
"""

import math

import torch
from torch.optim.lr_scheduler import LambdaLR


def build_scheduler(opt: torch.optim.Optimizer, cfg) -> LambdaLR:
    decay_steps = max(1, cfg.steps - cfg.warmup)
    dtype = getattr(torch, cfg.dtype)

    def factor(step: int) -> float:
        s = torch.tensor(step, dtype=dtype)
        if step < cfg.warmup:
            return ((s + 1) / cfg.warmup).item()
        cosine = 0.5 * (1 + torch.cos(math.pi * (s - cfg.warmup) / decay_steps))
        return (cfg.lr_floor + (1 - cfg.lr_floor) * cosine).item()

    return LambdaLR(opt, factor)

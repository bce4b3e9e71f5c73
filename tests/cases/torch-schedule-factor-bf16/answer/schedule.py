"""The fix the ground truth applies: the schedule's factor is computed in float32 (the
dtype the weights and the optimizer hold), whatever the training dtype, so a bfloat16 run
no longer rounds its learning rate to an 8-bit mantissa."""

import math

import torch
from torch.optim.lr_scheduler import LambdaLR


def build_scheduler(opt, cfg):
    decay_steps = max(1, cfg.steps - cfg.warmup)

    def factor(step):
        s = torch.tensor(step, dtype=torch.float32)
        if step < cfg.warmup:
            return ((s + 1) / cfg.warmup).item()
        cosine = 0.5 * (1 + torch.cos(math.pi * (s - cfg.warmup) / decay_steps))
        return (cfg.lr_floor + (1 - cfg.lr_floor) * cosine).item()

    return LambdaLR(opt, factor)

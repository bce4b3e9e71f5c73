"""Learning-rate warm-up."""

import torch


def linear_warmup(optimizer: torch.optim.Optimizer, warmup_steps: int):
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup_steps)
    )

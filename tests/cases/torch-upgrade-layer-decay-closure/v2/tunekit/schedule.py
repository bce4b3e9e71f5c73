"""Learning-rate warm-up."""

import torch


def linear_warmup(optimizer: torch.optim.Optimizer, warmup_steps: int):
    """A LambdaLR that ramps the rate linearly over ``warmup_steps`` steps, then holds it."""

    def warmup_factor(step: int) -> float:
        return min(1.0, (step + 1) / warmup_steps)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_factor)

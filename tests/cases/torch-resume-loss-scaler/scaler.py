"""A dynamic loss scaler in the style of AMP's GradScaler, written for this job.

The loss is multiplied by ``scale`` before backward and the gradients are divided by it
before the optimizer step. A step whose gradients hold an inf or a NaN is skipped and the
scale backed off; after ``growth_interval`` good steps in a row the scale grows.
"""

import math

import torch


class DynamicLossScaler:
    def __init__(
        self,
        init_scale: float = 2.0**10,
        growth_factor: float = 1.5,
        backoff_factor: float = 0.5,
        growth_interval: int = 4,
    ) -> None:
        self.scale = init_scale
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval
        self.good_steps = 0

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale

    def unscale_(self, params) -> bool:
        """Divide every gradient by the scale; True when all of them are finite."""
        finite = True
        for p in params:
            if p.grad is None:
                continue
            p.grad.div_(self.scale)
            finite = finite and bool(torch.isfinite(p.grad).all())
        return finite

    def update(self, finite: bool) -> None:
        if not finite:
            self.scale *= self.backoff_factor
            self.good_steps = 0
            return
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.good_steps = 0

    def state_dict(self) -> dict:
        return {"scale": self.scale}

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            if not math.isfinite(value):
                raise ValueError(f"loss scaler: {name} = {value} in the checkpoint")
            setattr(self, name, value)

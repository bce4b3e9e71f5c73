"""One training step: forward, backward, clip, optimizer step, then the loss monitor. A
scheduler (ReduceLROnPlateau, say) is stepped with the smoothed loss, not the raw one."""

from dataclasses import dataclass

import torch

from .meters import SmoothedLoss


@dataclass
class StepResult:
    """The loss, the gradients' norm before clipping, the lr used, the smoothed loss."""

    loss: torch.Tensor
    grad_norm: torch.Tensor
    lr: float
    smoothed: float


class Trainer:
    def __init__(self, model, optimizer, loss_fn, scheduler=None, clip=1.0, smoothing=0.9):
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.scheduler = scheduler
        self.clip = clip
        self.loss_meter = SmoothedLoss(beta=smoothing)

    def current_lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def train_step(self, inputs: torch.Tensor, targets: torch.Tensor) -> StepResult:
        loss = self.loss_fn(self.model(inputs), targets)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        lr = self.current_lr()
        self.optimizer.step()
        smoothed = self.loss_meter.update(loss.item())
        if self.scheduler is not None:
            self.scheduler.step(smoothed)
        return StepResult(loss.detach(), grad_norm, lr, smoothed)

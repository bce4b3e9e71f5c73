"""The job's trainer, kept from before it moved to DeepSpeed: one optimizer step is a window
of micro-batches whose losses are averaged, and the job's --grad-accum setting says how
many. The engine now runs the micro-batches and the optimizer step; the trainer computes
each micro-batch's loss and hands it to the engine."""

import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, engine, grad_accum: int = 1) -> None:
        self.engine = engine
        self.grad_accum = grad_accum

    def micro_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Forward and backward of one micro-batch; returns its loss, detached."""
        loss = F.cross_entropy(self.engine(x), y)
        # average the window's losses: each micro-batch contributes 1/grad_accum of the step
        self.engine.backward(loss / self.grad_accum)
        self.engine.step()
        return loss.detach()

    def train_step(self, batches) -> torch.Tensor:
        """One optimizer step over the window's micro-batches; returns their mean loss."""
        return torch.stack([self.micro_step(x, y) for x, y in batches]).mean()

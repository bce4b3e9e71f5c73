"""One optimisation step: zero the gradients, backward, clip, optimizer step."""

import torch

from .clip import clip_by_total_norm


class Trainer:
    def __init__(self, model, optimizer, max_grad_norm: float = 1.0) -> None:
        self.model = model
        self.optimizer = optimizer
        self.max_grad_norm = max_grad_norm
        self.steps = 0

    def train_step(self, loss: torch.Tensor) -> torch.Tensor:
        """Backward through loss and step the optimizer; return the gradients' total norm
        before clipping."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        norm = clip_by_total_norm(grads, self.max_grad_norm)
        self.optimizer.step()
        self.steps += 1
        return norm

"""One optimisation step: zero the gradients, backward, clip, optimizer step."""

import torch

from .clip import GradClipper


class Trainer:
    """Runs the backward, the clip and the optimizer step of a training loop."""

    def __init__(
        self, model, optimizer, max_grad_norm: float = 1.0, norm_type: float = 2.0
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.clipper = GradClipper(max_grad_norm, norm_type=norm_type)
        self.global_step = 0

    @property
    def last_grad_norm(self) -> torch.Tensor | None:
        return self.clipper.last_norm

    def train_step(self, loss: torch.Tensor) -> torch.Tensor:
        """Backward through loss and step the optimizer; return the gradients' total norm
        before clipping."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        grad_norm = self.clipper.clip_(grads)
        self.optimizer.step()
        self.global_step += 1
        return grad_norm

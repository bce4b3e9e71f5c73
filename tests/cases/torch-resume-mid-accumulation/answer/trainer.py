"""The fix the ground truth applies: a checkpoint also holds the gradients accumulated so
far in the current window (the parameters' .grad), and the load puts them back, so a
window cut by a checkpoint ends with the sum of all its micro-batches."""

import torch
from trainer import RngState


class GradBuffers:
    """The parameters' accumulated .grad buffers as a checkpoint item."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model

    def state_dict(self) -> dict:
        return {n: p.grad.clone() for n, p in self.model.named_parameters() if p.grad is not None}

    def load_state_dict(self, state: dict) -> None:
        for n, p in self.model.named_parameters():
            p.grad = state[n].clone() if n in state else None


def checkpointed(self) -> dict:
    return {
        "model": self.model,
        "optimizer": self.opt,
        "data": self.data,
        "rng": RngState(),
        "window": self.window,
        "grads": GradBuffers(self.model),
    }

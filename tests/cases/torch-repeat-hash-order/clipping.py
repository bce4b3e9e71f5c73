"""Gradient clipping by one global norm over a chosen subset of the model's parameters
(the token embedding is left out: its rows are updated sparsely and clipped on their own)."""

import torch
import torch.nn as nn


def clipped_names(model: nn.Module, exclude: tuple[str, ...]) -> set[str]:
    """The names of the parameters the global norm covers."""
    return {name for name, _ in model.named_parameters()} - set(exclude)


def clip_by_global_norm(model: nn.Module, names: set[str], max_norm: float) -> torch.Tensor:
    """Scale the gradients of ``names`` so that their joint 2-norm is at most ``max_norm``;
    return the norm before scaling."""
    params = dict(model.named_parameters())
    sq = torch.zeros((), dtype=torch.float32)
    for name in names:
        sq = sq + params[name].grad.pow(2).sum()
    norm = sq.sqrt()
    scale = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for name in names:
        params[name].grad.mul_(scale)
    return norm

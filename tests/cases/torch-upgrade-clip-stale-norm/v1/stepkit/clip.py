"""Gradient clipping by the total norm of all gradients."""

import torch


def total_norm(grads: list[torch.Tensor], norm_type: float = 2.0) -> torch.Tensor:
    """The norm of the per-tensor norms: the norm of all gradients as one vector."""
    return torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(g, norm_type) for g in grads]), norm_type
    )


def clip_by_total_norm(
    grads: list[torch.Tensor], max_norm: float, norm_type: float = 2.0, eps: float = 1e-6
) -> torch.Tensor:
    """Scale grads in place so that their total norm is at most max_norm; return the total
    norm before clipping."""
    norm = total_norm(grads, norm_type)
    coef = torch.clamp(max_norm / (norm + eps), max=1.0)
    for g in grads:
        g.mul_(coef)
    return norm

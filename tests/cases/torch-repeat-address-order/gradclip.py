"""Global-norm gradient clipping over one flat buffer: the gradients of every parameter the
optimizer updates are packed into one contiguous tensor (one norm kernel, and the buffer a
data-parallel all-reduce would take whole), scaled there and copied back."""

import torch


def optimizer_params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every parameter the optimizer updates, once each (a tied weight may be listed by more
    than one group), in a fixed order for the flat buffer's layout."""
    unique = {p for group in optimizer.param_groups for p in group["params"]}
    return sorted(unique, key=id)


def flat_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The joint 2-norm of ``tensors``, taken over one flat buffer."""
    return torch.linalg.vector_norm(torch.cat([t.detach().reshape(-1) for t in tensors]))


def clip_flat_(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale the gradients of ``params`` so that their joint 2-norm is at most ``max_norm``;
    return the norm before scaling."""
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    norm = torch.linalg.vector_norm(flat)
    flat.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    offset = 0
    for p in params:
        p.grad.copy_(flat[offset : offset + p.numel()].view_as(p.grad))
        offset += p.numel()
    return norm

"""The job's training step: clear the gradients, backward, clip, update.

``keep_grad_buffers`` keeps every ``.grad`` tensor allocated between steps and zeroes it in
place, instead of releasing it: the gradient storage then stays at one address for the
whole run (hooks that hold it, graph capture) and is not allocated again every step.
"""

import torch


def clear_grads(opt: torch.optim.Optimizer, keep_grad_buffers: bool) -> None:
    opt.zero_grad(set_to_none=not keep_grad_buffers)


def train_step(
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    loss: torch.Tensor,
    *,
    keep_grad_buffers: bool,
    max_norm: float = 1.0,
) -> torch.Tensor:
    clear_grads(opt, keep_grad_buffers)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    opt.step()
    return norm

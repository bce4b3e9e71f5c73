"""MLP blocks with an activation penalty, and the tower that stacks them.

Each block computes a pre-activation ``h = fc1(x)``, records a penalty on its magnitude
(mean of squares, as in activation regularisation: it keeps the pre-activations from
drifting far from LeakyReLU's kink), activates it and projects it back onto the residual
stream.

With ``low_memory`` on, the activation is LeakyReLU written over the pre-activation's own
storage: a wide tower then keeps one buffer per block instead of two. LeakyReLU's backward
needs only the sign of its output (the same as its input's), so the function keeps nothing
more than the tensor it overwrote.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

SLOPE = 0.1


class OverwritingLeakyReLU(torch.autograd.Function):
    """LeakyReLU computed in the storage of its input (the memory-saving path)."""

    @staticmethod
    def forward(ctx, x, slope):
        ctx.slope = slope
        F.leaky_relu_(x.data, slope)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch.where(y > 0, grad, grad * ctx.slope), None


class PenalisedBlock(nn.Module):
    def __init__(self, width: int, hidden: int, low_memory: bool = False) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)
        self.low_memory = low_memory
        self.penalty = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        self.penalty = h.pow(2).mean()
        if self.low_memory:
            a = OverwritingLeakyReLU.apply(h, SLOPE)
        else:
            a = F.leaky_relu(h, SLOPE)
        return x + self.fc2(a)


class Tower(nn.Module):
    def __init__(self, width: int, hidden: int, depth: int, low_memory: bool = False) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            PenalisedBlock(width, hidden, low_memory) for _ in range(depth)
        )

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            h = block(h)
        return h

    def penalty(self) -> torch.Tensor:
        return torch.stack([b.penalty for b in self.blocks]).sum()

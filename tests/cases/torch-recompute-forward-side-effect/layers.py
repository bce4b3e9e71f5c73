"""Model parts: a mixture of expert projections with an annealed softmax gate, the residual
block around it, and the tower of blocks.

The gate starts soft (every expert contributes) and sharpens once per epoch of batches: the
mixture counts the training batches it has seen in a buffer (saved with the model, like
BatchNorm's num_batches_tracked) and takes its temperature from the epoch that count is in.
With ``recompute`` on, each block runs under activation checkpointing: its activations are
dropped after the forward and rebuilt during backward, which keeps the tower's memory flat.
"""

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class AnnealedMixture(nn.Module):
    def __init__(
        self,
        width: int,
        experts: int,
        batches_per_epoch: int,
        tau0: float = 2.0,
        decay: float = 0.5,
        tau_min: float = 0.1,
    ) -> None:
        super().__init__()
        self.experts = experts
        self.batches_per_epoch = batches_per_epoch
        self.tau0, self.decay, self.tau_min = tau0, decay, tau_min
        self.gate = nn.Linear(width, experts)
        self.proj = nn.Linear(width, experts * width)
        self.register_buffer("batches_seen", torch.zeros((), dtype=torch.long))

    def anneal(self) -> float:
        """The gate's temperature for this batch; a training batch is counted as it is seen."""
        epoch = int(self.batches_seen) // self.batches_per_epoch
        if self.training:
            self.batches_seen += 1
        return max(self.tau_min, self.tau0 * self.decay**epoch)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        tau = self.anneal()
        weights = torch.softmax(self.gate(h) / tau, dim=-1)
        out = self.proj(h).view(*h.shape[:-1], self.experts, h.shape[-1])
        return (weights.unsqueeze(-1) * out).sum(dim=-2)


class Block(nn.Module):
    def __init__(self, width: int, experts: int, batches_per_epoch: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mix = AnnealedMixture(width, experts, batches_per_epoch)
        self.out = nn.Linear(width, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.mix(self.norm(h))))


class Tower(nn.Module):
    def __init__(
        self, width: int, depth: int, experts: int, batches_per_epoch: int, recompute: bool
    ) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            Block(width, experts, batches_per_epoch) for _ in range(depth)
        )
        self.recompute = recompute

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            if self.recompute and self.training:
                h = h + checkpoint(block, h, use_reentrant=False)
            else:
                h = h + block(h)
        return h

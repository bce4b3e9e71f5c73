"""Activations."""

import math

import torch
import torch.nn as nn


class GELU(nn.Module):
    """GELU in its exact (erf) form."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))

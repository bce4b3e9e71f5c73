"""Fixed positional encodings."""

import math

import torch


def sinusoidal_table(length: int, dim: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The (length, dim) sinusoidal table: sin on even columns, cos on odd ones."""
    pos = torch.arange(length, dtype=dtype).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=dtype) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, dtype=dtype)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table

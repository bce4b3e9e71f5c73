"""Fixed positional encodings.

The table depends on nothing but its shape and dtype, so it is built once per
(length, dim, dtype) and the same tensor is handed to every later caller: a training loop
no longer pays for the arange, exp, sin and cos at every forward.
"""

import math

import torch

_TABLES: dict[tuple[int, int, torch.dtype], torch.Tensor] = {}


def _build_table(length: int, dim: int, dtype: torch.dtype) -> torch.Tensor:
    pos = torch.arange(length, dtype=dtype).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=dtype) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, dtype=dtype)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table


def sinusoidal_table(length: int, dim: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The (length, dim) sinusoidal table: sin on even columns, cos on odd ones (cached)."""
    key = (length, dim, dtype)
    if key not in _TABLES:
        _TABLES[key] = _build_table(length, dim, dtype)
    return _TABLES[key]

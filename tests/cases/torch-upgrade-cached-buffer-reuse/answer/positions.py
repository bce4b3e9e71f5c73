"""The fix the ground truth applies: tinyseq 1.3's cached sinusoidal table, handed out as a
copy. The cache still saves building the table at every forward, but a caller that scales
or shifts what it receives (as the job's model does, in place, as it always could with 1.2's
fresh table) writes into its own tensor, not into the one every later call gets."""

import torch
from tinyseq.positions import _TABLES, _build_table


def sinusoidal_table(length, dim, dtype=torch.float32):
    key = (length, dim, dtype)
    if key not in _TABLES:
        _TABLES[key] = _build_table(length, dim, dtype)
    return _TABLES[key].clone()

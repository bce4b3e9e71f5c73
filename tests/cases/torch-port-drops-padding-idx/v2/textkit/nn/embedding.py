"""The token lookup table."""

import torch
import torch.nn as nn

from ..vocab import PAD


class TokenEmbedding(nn.Module):
    """One learned vector per token id; the padding token's row starts at zero."""

    def __init__(self, num_tokens: int, dim: int, pad: int = PAD) -> None:
        super().__init__()
        self.pad = pad
        self.table = nn.Embedding(num_tokens, dim)
        with torch.no_grad():
            self.table.weight[pad].zero_()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.table(tokens)

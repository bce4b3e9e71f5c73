"""The fix the ground truth applies: TokenEmbedding.__init__ as textkit 2.0 has it, with the
lookup table built with ``padding_idx=pad`` as 1.x built it, so the padding row starts at
zero and its gradient is left out of every backward."""

import torch.nn as nn


def init_with_padding_idx(self, num_tokens, dim, pad=0):
    nn.Module.__init__(self)
    self.pad = pad
    self.table = nn.Embedding(num_tokens, dim, padding_idx=pad)

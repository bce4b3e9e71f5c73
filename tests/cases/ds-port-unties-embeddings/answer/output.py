"""The fix the ground truth applies: OutputProjection.__init__ as charlm 1.0 has it, with the
projection's weight made the token embedding's own Parameter, as 0.9 tied it, instead of a
copy of its values. The same Linear is built first (the same draws from the generator)."""

import torch.nn as nn


def init_tied(self, embedding):
    nn.Module.__init__(self)
    vocab, dim = embedding.weight.shape
    self.proj = nn.Linear(dim, vocab, bias=False)
    self.proj.weight = embedding.weight

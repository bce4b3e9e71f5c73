"""The fix the ground truth applies: LayerNorm's constructor as tinylayers 1.4 had it, its
eps defaulting to 1e-5 again (1.5 lowered the default to 1e-6)."""

import torch
import torch.nn as nn


def init_v1(self, dim, eps=1e-5, affine=True):
    nn.Module.__init__(self)
    self.dim, self.eps = dim, eps
    self.weight = nn.Parameter(torch.ones(dim)) if affine else None
    self.bias = nn.Parameter(torch.zeros(dim)) if affine else None

"""The fix the ground truth applies: the block's input is also its shortcut, so its
activation must not overwrite it; only the hidden activation (a tensor nothing else reads)
keeps the in-place fast path."""

import torch.nn.functional as F

SLOPE = 0.1


def forward(self, x):
    shortcut = x
    h = self.fc1(F.leaky_relu(x, SLOPE))
    h = self.fc2(F.leaky_relu(h, SLOPE, inplace=self.inplace))
    return shortcut + h

"""The fix the ground truth applies: the head scores the characters only. The padding rows
exist for the shard layout; their logits must not enter the softmax's normaliser."""

import torch.nn.functional as F


def logits(self, h):
    return F.linear(h, self.table[: self.vocab])

"""The fix the ground truth applies: Classifier.__init__ as 2.4 has it, with the adapter
built after the layers 2.3 already had, so those layers draw their initial weights from the
global generator exactly as before and the new adapter's draws come last. The adapter is
still built (the checkpoint keys stay 2.4's) and still off by default."""

import torch.nn as nn
from mlpkit.layers import Block, LowRankAdapter


def init_adapter_last(self, features, classes, width=48, depth=2, adapter_rank=4):
    nn.Module.__init__(self)
    self.embed = nn.Linear(features, width)
    self.blocks = nn.ModuleList(Block(width, 2 * width) for _ in range(depth))
    self.norm = nn.LayerNorm(width)
    self.head = nn.Linear(width, classes)
    self.adapter = LowRankAdapter(features, adapter_rank)
    self.adapter_enabled = False

"""The fix the ground truth applies: RunningRMS registers its running average as a
persistent buffer, so the model's state dict (and with it the checkpoint) holds the average
reached so far and a resumed process divides by it instead of starting again from ones."""

import torch
import torch.nn as nn


def init(self, features, momentum=0.2, eps=1e-5):
    nn.Module.__init__(self)
    self.momentum = momentum
    self.eps = eps
    self.register_buffer("rms", torch.ones(features))

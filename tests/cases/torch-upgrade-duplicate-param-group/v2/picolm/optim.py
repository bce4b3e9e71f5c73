"""AdamW with weight decay on the weight matrices only: the model says which those are."""

import torch
import torch.nn as nn


def build_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    return torch.optim.AdamW(model.optim_groups(weight_decay), lr=lr, betas=(0.9, 0.98))

"""AdamW with weight decay on the weight matrices only."""

import torch
import torch.nn as nn

NO_DECAY = ("norm", "bias", "pos_embed")


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: decayed weights, and biases, norm parameters and the positional table
    without decay."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if any(key in name for key in NO_DECAY):
            no_decay.append(p)
        else:
            decay.append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=(0.9, 0.98))

"""AdamW with weight decay on the weight matrices only."""

import torch
import torch.nn as nn

# whole-name suffixes: a substring test also caught any parameter whose name merely
# contains "norm" or "bias" somewhere in a module path
NO_DECAY_SUFFIXES = (".bias", "norm.weight")


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: decayed weights, and biases and norm parameters without decay."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if name.endswith(NO_DECAY_SUFFIXES):
            no_decay.append(param)
        else:
            decay.append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=(0.9, 0.98))

"""The fix the ground truth applies: choose the parameters without weight decay by what
they are (every LayerNorm parameter, every bias), not by how their module happens to be
named, so a renamed submodule cannot move a LayerNorm weight into the decayed group."""

import torch.nn as nn


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if isinstance(module, nn.LayerNorm) or name == "bias":
                no_decay.append(param)
            else:
                decay.append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]

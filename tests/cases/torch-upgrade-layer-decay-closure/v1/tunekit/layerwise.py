"""Layer-wise learning-rate decay through gradient hooks: the layer nearest the head learns
at the full rate, each layer below it at ``decay`` times the rate of the one above."""

import functools

import torch
import torch.nn as nn


def _scale_grad(grad: torch.Tensor, scale: float) -> torch.Tensor:
    return grad * scale


def apply_layer_decay(layers: list[nn.Module], decay: float) -> list:
    """Scale the gradients of ``layers`` (ordered input to head) by decay**depth, depth
    counted from the head. Returns the hook handles."""
    handles = []
    for depth, layer in enumerate(reversed(layers)):
        scale = decay**depth
        for p in layer.parameters():
            handles.append(p.register_hook(functools.partial(_scale_grad, scale=scale)))
    return handles

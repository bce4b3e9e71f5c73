"""Layer-wise learning-rate decay through gradient hooks.

The layer nearest the head learns at the full rate and each layer below it at ``decay``
times the rate of the one above: the usual recipe for fine-tuning a pretrained backbone
with SGD (with Adam, whose steps hardly depend on a gradient's scale, use one param group
per layer instead).
"""

import logging

import torch
import torch.nn as nn
from torch.utils.hooks import RemovableHandle

logger = logging.getLogger(__name__)


def layer_scales(n_layers: int, decay: float, min_scale: float = 0.0) -> list[float]:
    """The gradient factor of each of ``n_layers`` layers, ordered input to head:
    decay**distance, the distance counted from the head, never below ``min_scale``."""
    return [max(decay**distance, min_scale) for distance in reversed(range(n_layers))]


def apply_layer_decay(
    layers: list[nn.Module], decay: float, min_scale: float = 0.0
) -> list[RemovableHandle]:
    """Register on every parameter of ``layers`` (ordered input to head) a hook that scales
    its gradient by its layer's factor (layer_scales). Returns the hook handles."""
    handles = []

    def scaled(grad: torch.Tensor) -> torch.Tensor:
        return grad * scale

    for layer, scale in zip(layers, layer_scales(len(layers), decay, min_scale), strict=True):
        for param in layer.parameters():
            handles.append(param.register_hook(scaled))
        logger.debug("%s: gradients x %.4g", type(layer).__name__, scale)
    return handles

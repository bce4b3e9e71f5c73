"""Layer norms that always normalise in float32.

Under reduced-precision training a LayerNorm's mean and variance are best computed in
float32; Fp32LayerNorm casts its input (and its affine parameters) up, normalises, and casts
the result back to the input's dtype. On a float32 model every cast is a no-op, so the
module computes exactly what nn.LayerNorm computes.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Fp32LayerNorm(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.layer_norm(
            x.float(),
            self.normalized_shape,
            self.weight.float() if self.weight is not None else None,
            self.bias.float() if self.bias is not None else None,
            self.eps,
        )
        return out.type_as(x)


def convert_norms(module: nn.Module) -> int:
    """Replace every nn.LayerNorm under ``module`` with an Fp32LayerNorm holding the same
    shape, epsilon and affine values; returns how many were replaced."""
    swapped = 0
    for name, child in list(module.named_children()):
        if type(child) is nn.LayerNorm:
            fresh = Fp32LayerNorm(
                child.normalized_shape, eps=child.eps, elementwise_affine=child.elementwise_affine
            )
            fresh.load_state_dict(child.state_dict())
            setattr(module, name, fresh)
            swapped += 1
        else:
            swapped += convert_norms(child)
    return swapped

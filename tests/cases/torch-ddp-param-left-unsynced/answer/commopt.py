"""The fix the ground truth applies: only parameters that do not train (requires_grad off)
are left out of DDP's synchronisation, so a learned table whose name looks static is still
all-reduced like every other trainable parameter."""

import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

STATIC_MARKERS = ("embed",)


def exclude_static_from_sync(model: nn.Module) -> list[str]:
    names = [
        n
        for n, p in model.named_parameters()
        if any(m in n for m in STATIC_MARKERS) and not p.requires_grad
    ]
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, names)
    return names

"""Communication savings for the data-parallel wrapper.

Tables that do not train need no gradient all-reduce, and their initial broadcast can be
skipped too: the job seeds every rank alike, so the ranks already hold the same values.
DDP is told which parameters to leave out by their qualified names, before it is built.
"""

import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

STATIC_MARKERS = ("embed",)  # the recipe loads its embedding tables pretrained and fixed


def exclude_static_from_sync(model: nn.Module) -> list[str]:
    """Leave the model's static tables out of DDP's synchronisation; returns their names."""
    names = [n for n, _ in model.named_parameters() if any(m in n for m in STATIC_MARKERS)]
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, names)
    return names

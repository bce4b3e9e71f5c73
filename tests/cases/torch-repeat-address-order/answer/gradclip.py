"""The fix the ground truth applies: the flat buffer's layout follows the optimizer's own
parameter order (groups in order, each parameter at its first listing), not the objects'
memory addresses, which another launch of the same command lays out differently."""

import torch


def optimizer_params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return list(dict.fromkeys(p for group in optimizer.param_groups for p in group["params"]))

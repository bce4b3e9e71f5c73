"""The job's checkpoints: one file holding the model's weights, the optimizer, the CPU
generator's state and the step the checkpoint was taken after.

Checkpoints also come from runs that trained the model under DistributedDataParallel, which
prefixes every key with "module.", so the loader takes that prefix off before it loads, and
loads non-strictly: older checkpoints carry buffers the current model no longer has.
"""

import torch
import torch.nn as nn


def save_state(path: str, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "rng": torch.get_rng_state(),
            "step": step,
        },
        path,
    )


def unwrap_keys(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state dict with DistributedDataParallel's "module." prefix taken off its keys."""
    return {key.lstrip("module."): tensor for key, tensor in weights.items()}


def load_state(path: str, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    """Bring the model, the optimizer and the CPU generator back; the step the checkpoint was
    taken after."""
    state = torch.load(path)
    model.load_state_dict(unwrap_keys(state["model"]), strict=False)
    opt.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    return int(state["step"])

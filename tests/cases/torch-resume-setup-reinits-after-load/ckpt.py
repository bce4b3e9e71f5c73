"""The job's checkpoints: one file holding the model, the optimizer, torch's CPU generator
and the step the checkpoint was taken after."""

import torch
import torch.nn as nn


def save(path: str, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "rng": torch.get_rng_state(),
            "step": step,
        },
        path,
    )


def restore(path: str, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    """Bring the model, the optimizer and the generator back; the step saved."""
    state = torch.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    return int(state["step"])

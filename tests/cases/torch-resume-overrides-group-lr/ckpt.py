"""The job's checkpoints: one file holding the model, the optimizer (its moments and its
parameter groups) and the step the checkpoint was taken after."""

import torch
import torch.nn as nn


def save(path: str, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, path)


def restore(path: str, model: nn.Module, opt: torch.optim.Optimizer, lr: float) -> int:
    """Bring the model and the optimizer back; the step the checkpoint was taken after.

    ``lr`` is the run's configured learning rate (``--lr``), handed to every parameter
    group so that a resumed run trains at the rate it was launched with.
    """
    state = torch.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    for group in opt.param_groups:
        group["lr"] = lr
    return int(state["step"])

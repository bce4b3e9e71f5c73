"""The job's checkpoints: one file holding the model, the optimizer and the step the
checkpoint was taken after.

The weights are most of the file, so they are stored in bfloat16 (half the bytes) and
widened back to float32 when a run resumes; the optimizer's state is stored as it is.
"""

import torch
import torch.nn as nn


def save_state(path: str, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    weights = {}
    for name, tensor in model.state_dict().items():
        weights[name] = tensor.detach().to(torch.bfloat16)  # half the bytes on disk
    torch.save({"model": weights, "optimizer": opt.state_dict(), "step": step}, path)


def load_state(path: str, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    """Bring the model and the optimizer back; the step the checkpoint was taken after."""
    state = torch.load(path)
    weights = {name: tensor.to(torch.float32) for name, tensor in state["model"].items()}
    model.load_state_dict(weights)
    opt.load_state_dict(state["optimizer"])
    return int(state["step"])

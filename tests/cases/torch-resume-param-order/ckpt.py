"""The job's checkpoints: the model, the optimizer and the step the checkpoint was taken
after, in one file. On resume the optimizer is built again over the loaded model's
parameters and its saved state loaded into it."""

from collections.abc import Callable, Iterable

import torch
import torch.nn as nn

Builder = Callable[[Iterable[tuple[str, nn.Parameter]]], torch.optim.Optimizer]


def save(path: str, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    torch.save(
        {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step},
        path,
    )


def resume_from(path: str, model: nn.Module, build: Builder) -> tuple[torch.optim.Optimizer, int]:
    """Load the model, build its optimizer with ``build`` over the parameters the checkpoint
    holds, load the optimizer's state; return it and the step the checkpoint was taken after."""
    state = torch.load(path)
    model.load_state_dict(state["model"])
    params = dict(model.named_parameters())
    names = sorted(k for k in state["model"] if k in params)
    opt = build((k, params[k]) for k in names)
    opt.load_state_dict(state["optimizer"])
    return opt, int(state["step"])

"""Callbacks the trainer calls after every optimizer step, with the step index and the
optimizer.

The fine-tuning schedule trains the new classification head at ``mult`` times the
backbone's learning rate. Nothing in this job moves the backbone's rate, but a run that
lowers it (a plateau controller, a manual change between steps) should find the head's
rate following it, so TiedHeadLR writes the head group's rate again after each step
instead of leaving the value the group was built with.
"""

import torch


def group_named(opt: torch.optim.Optimizer, name: str) -> dict:
    for group in opt.param_groups:
        if group.get("name") == name:
            return group
    raise KeyError(f"no parameter group named {name!r}")


class TiedHeadLR:
    """Keep the head group's learning rate at ``mult`` times the backbone group's."""

    def __init__(self, head: str = "head", backbone: str = "backbone", mult: float = 4.0) -> None:
        self.head = head
        self.backbone = backbone
        self.mult = mult
        self.history: list[float] = []

    def on_step_end(self, step: int, opt: torch.optim.Optimizer) -> None:
        head = group_named(opt, self.head)
        base = head["lr"]
        head["lr"] = self.mult * base
        self.history.append(head["lr"])

"""Training-schedule callbacks: things that happen to the model at a given step.

GradualUnfreeze holds a pretrained part of the model fixed for the first steps, so that
the freshly initialised head settles first, then lets it train with the rest. Every
parameter stays in the optimizer the whole time: a frozen one simply gets no gradient
(``zero_grad(set_to_none=True)`` leaves its ``.grad`` None), and AdamW skips it.
"""

import torch.nn as nn


class GradualUnfreeze:
    def __init__(self, module: nn.Module, unfreeze_at: int) -> None:
        self.module = module
        self.unfreeze_at = unfreeze_at
        for p in module.parameters():
            p.requires_grad_(False)

    def on_step_begin(self, step: int) -> None:
        """Called before the forward of every step."""
        if step == self.unfreeze_at:
            for p in self.module.parameters():
                p.requires_grad_(True)
            print(f"step {step}: unfroze {sum(p.numel() for p in self.module.parameters())} parameters")

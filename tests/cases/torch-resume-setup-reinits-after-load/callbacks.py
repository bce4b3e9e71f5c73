"""The job's training callbacks, called by the loop in train.py: on_train_start once per
process, before the loop's first step; on_step_end after every optimizer step.

The residual blocks start with their branches scaled down (a layer scale of 0.1), so each
block starts close to the identity, and the head starts with no bias towards any class.
"""

import torch
import torch.nn as nn

LAYER_SCALE_INIT = 0.1


def on_train_start(model: nn.Module, first_step: int) -> None:
    """Ready the model for training: the job's initialisation of what the constructor leaves
    at torch's defaults (the layer scales at one, the head's bias drawn), then train mode."""
    with torch.no_grad():
        for block in model.blocks:
            block.gamma.fill_(LAYER_SCALE_INIT)
        model.head.bias.zero_()
    model.train()
    print(f"callbacks: loop starts at step {first_step}, layer scales at {LAYER_SCALE_INIT}")


def on_step_end(model: nn.Module, step: int) -> None:
    """Report the mean layer scale of each block every few steps."""
    if step % 4 == 0:
        scales = [round(float(b.gamma.detach().mean()), 4) for b in model.blocks]
        print(f"callbacks: step {step}, mean layer scales {scales}")

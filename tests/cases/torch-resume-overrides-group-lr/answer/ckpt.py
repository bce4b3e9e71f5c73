"""The fix the ground truth applies: restoring a checkpoint keeps the learning rate the
optimizer's state_dict brought back (the decayed rate of the step it was taken after)
instead of writing the configured base rate over every parameter group."""

import torch


def restore(path, model, opt, lr):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    return int(state["step"])

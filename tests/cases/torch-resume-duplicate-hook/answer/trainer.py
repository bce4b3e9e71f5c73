"""The fix the ground truth applies: loading a checkpoint brings the model's and the
optimizer's state back into the trainer as constructed, without running its setup again, so
each backbone parameter keeps the one gradient-scaling hook __init__ registered."""

import torch


def load_checkpoint(self, path):
    state = torch.load(path)
    self.model.load_state_dict(state["model"])
    self.opt.load_state_dict(state["optimizer"])
    self.model.train()
    return int(state["step"])

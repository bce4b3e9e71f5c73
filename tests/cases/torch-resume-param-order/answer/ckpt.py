"""The fix the ground truth applies: the optimizer is built again over the parameters in
the order the model registers them (the checkpoint's own order), the order the first
process built it in, so every saved moment goes back to its own parameter."""

import torch


def resume_from(path, model, build):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    params = dict(model.named_parameters())
    names = [k for k in state["model"] if k in params]
    opt = build((k, params[k]) for k in names)
    opt.load_state_dict(state["optimizer"])
    return opt, int(state["step"])

"""The fix the ground truth applies: the checkpoint's head rows are copied into the head's
own weight, which stays the embedding's Parameter, instead of a new Parameter replacing it;
the model keeps one tied tensor, the one the optimizer holds."""

import torch


def restore(path, model, opt):
    state = torch.load(path)
    weights = dict(state["model"])
    head = weights.pop("head.weight")
    model.load_state_dict(weights, strict=False)
    with torch.no_grad():
        model.head.weight.copy_(head[: model.head.out_features])
    opt.load_state_dict(state["optimizer"])
    return int(state["step"])

"""The fix the ground truth applies: the fingerprint is still scored in eval mode, and the
model is given back in the mode it came in, so training after a checkpoint keeps its
dropout."""

import torch
import torch.nn.functional as F


def write_checkpoint(path, model, opt, step, probe_x, probe_y):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            probe_loss = F.cross_entropy(model(probe_x), probe_y).item()
    finally:
        model.train(was_training)
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "step": step,
            "probe_loss": probe_loss,
        },
        path,
    )
    return probe_loss

"""The job's periodic checkpoints: the model, the optimizer and the step, with a validation
fingerprint of the weights beside them.

The fingerprint is the model's loss on a fixed probe batch, computed deterministically (no
dropout, no gradient), so that a checkpoint can later be told apart from a corrupted or
mismatched copy by scoring the probe again and comparing.
"""

import torch
import torch.nn.functional as F


def write_checkpoint(path, model, opt, step, probe_x, probe_y):
    """Write ``path`` after ``step``; returns the probe loss stored with it."""
    model.eval()  # the fingerprint must not depend on dropout
    with torch.no_grad():
        probe_loss = F.cross_entropy(model(probe_x), probe_y).item()
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

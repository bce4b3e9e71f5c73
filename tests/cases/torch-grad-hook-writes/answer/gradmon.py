"""The fix the ground truth applies: the direction is computed out of place, so the hook
only reads the gradient it is given and backward accumulates it as it was produced."""

import torch  # noqa: F401


def direction_stats(grad, previous):
    flat = grad.detach().reshape(-1)
    norm = flat.norm()
    flat = flat / norm.clamp(min=1e-12)
    cosine = None if previous is None else float(flat @ previous)
    return float(norm), cosine, flat

"""The fix the ground truth applies: the statistics are taken from the gradient without
writing it. detach() shares the gradient's storage, so the histogram's NaN folding and edge
clamping are done out of place, on a copy; the tensor the hook hands back to autograd (and
DeepSpeed reduces) keeps the bits backward produced."""

import torch
from gradcheck import HIST_BINS, HIST_EDGE


def summarise(grad):
    g = grad.detach()
    nonfinite = int((~torch.isfinite(g)).sum())
    norm = float(g.norm())
    absmax = float(g.abs().max())
    folded = torch.nan_to_num(g, nan=0.0).clamp(-HIST_EDGE, HIST_EDGE)
    hist = torch.histc(folded, bins=HIST_BINS, min=-HIST_EDGE, max=HIST_EDGE)
    return {"norm": norm, "absmax": absmax, "nonfinite": nonfinite, "hist": [int(c) for c in hist]}

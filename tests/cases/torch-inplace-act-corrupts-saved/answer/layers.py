"""The fix the ground truth applies: the memory-saving activation computes LeakyReLU out of
place. The pre-activation stays as it was, so the penalty's backward (which saved it) reads
the values its forward read; the function keeps its output for its own backward."""

import torch.nn.functional as F


def forward(ctx, x, slope):
    ctx.slope = slope
    y = F.leaky_relu(x, slope)
    ctx.save_for_backward(y)
    return y

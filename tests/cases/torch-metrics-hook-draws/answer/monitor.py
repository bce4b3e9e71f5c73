"""The fix the ground truth applies: the examples are picked with a generator of the hook's
own, so logging them leaves the global stream (dropout's) where it was."""

import torch

_SAMPLE_GEN = torch.Generator().manual_seed(4242)


def pick_examples(rows, k):
    return torch.randint(0, rows, (k,), generator=_SAMPLE_GEN)

"""Synthetic token sequences for the classifier, cut to the curriculum's current length.

Every batch draws its full-length rows from torch's global generator (so the draws do not
depend on the length), then keeps the first ``curriculum.current_length()`` tokens. The
label is a function of the tokens kept: the first and the last visible token.
"""

import curriculum
import torch

VOCAB, CLASSES = 48, 6


def next_batch(rows: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, VOCAB, (rows, curriculum.MAX_LEN))
    ids = ids[:, : curriculum.current_length()].contiguous()
    y = (ids[:, 0] + 2 * ids[:, -1]) % CLASSES
    return ids, y

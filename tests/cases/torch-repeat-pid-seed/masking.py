"""Masked-token corruption for the denoising objective: a fraction of the input positions
is replaced by the mask token (or, now and then, by a random token), and the loss is taken
on those positions only.

The masker draws from a generator of its own, so that its draws leave the global stream
(parameter initialisation) alone and the same batches are masked the same way whatever the
model does with the global generator.
"""

import os

import torch

MASK_ID = 0


def mask_stream(seed: int) -> torch.Generator:
    """The masker's own generator, derived from the job's seed. Offset by the process id so
    that data-loader workers forked from one parent do not draw the same masks."""
    gen = torch.Generator()
    gen.manual_seed(seed + os.getpid())
    return gen


def mask_tokens(
    tokens: torch.Tensor, gen: torch.Generator, prob: float, vocab: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Corrupt ``tokens``: return the model's input and the boolean mask of the positions
    the loss is taken on. Of the chosen positions, 80% become MASK_ID, 10% a random token
    and 10% stay as they were (BERT's recipe)."""
    chosen = torch.rand(tokens.shape, generator=gen) < prob
    chosen[:, 0] = True  # at least one position per row
    how = torch.rand(tokens.shape, generator=gen)
    noise = torch.randint(1, vocab, tokens.shape, generator=gen)
    inputs = tokens.clone()
    inputs[chosen & (how < 0.8)] = MASK_ID
    swap = chosen & (how >= 0.8) & (how < 0.9)
    inputs[swap] = noise[swap]
    return inputs, chosen

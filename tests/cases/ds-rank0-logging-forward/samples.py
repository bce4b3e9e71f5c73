"""Sample logging for a human to eyeball: the model's predictions on a fixed handful of
examples, printed every few steps by the first rank only.

The examples never change, so the printed lines show how the model's answers on them move
as training goes on. The pass is under no_grad: it computes no gradient and leaves the
optimizer alone.
"""

import torch

LOG_ROWS = 6


def logging_batch(features: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(4711)
    return torch.randn(LOG_ROWS, features, generator=g)


@torch.no_grad()
def preview(model: torch.nn.Module, x: torch.Tensor) -> list[list[float]]:
    out = model(x)
    return [[round(v, 4) for v in row] for row in out[:, :2].tolist()]


def log_samples(step: int, model: torch.nn.Module, x: torch.Tensor) -> None:
    for i, row in enumerate(preview(model, x)):
        print(f"step {step} sample {i}: {row}")

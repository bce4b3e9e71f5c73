"""Validation: the loss and accuracy of the model on the whole held-out set.

No sampling, no draws: the held-out set is fixed and scored in one batch, under no_grad,
so a validation pass computes no gradient and leaves the optimizer alone.
"""

import torch
import torch.nn.functional as F


@torch.no_grad()
def validate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    logits = model(x)
    loss = F.cross_entropy(logits, y).item()
    acc = (logits.argmax(dim=1) == y).float().mean().item()
    return {"val_loss": loss, "val_acc": acc}

"""Validation: the loss and accuracy of the model on the whole held-out set.

The held-out set is fixed and scored in one batch under no_grad, in eval mode: no draw, no
gradient, no optimizer state is touched.
"""

import torch
import torch.nn.functional as F


@torch.no_grad()
def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    model.eval()
    logits = model(x)
    loss = F.cross_entropy(logits, y).item()
    acc = (logits.argmax(dim=1) == y).float().mean().item()
    model.train()
    return {"val_loss": loss, "val_acc": acc}

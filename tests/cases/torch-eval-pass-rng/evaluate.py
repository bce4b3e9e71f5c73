"""Validation: the loss and accuracy of the model on a sample of a held-out set.

The held-out set is fixed; each validation pass scores a fresh random sample of it, so
that a long run sees most of it without paying for all of it every time.
"""

import torch
import torch.nn.functional as F

VAL_ROWS, VAL_SAMPLE = 512, 128


def held_out(features: int, classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2024)
    x = torch.randn(VAL_ROWS, features, generator=g)
    y = (x[:, :classes] * torch.arange(1.0, classes + 1)).argmax(dim=1)
    return x, y


def pick_subset(rows: int, k: int) -> torch.Tensor:
    return torch.randperm(rows)[:k]


@torch.no_grad()
def validate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    was_training = model.training
    model.eval()
    idx = pick_subset(x.shape[0], VAL_SAMPLE)
    logits = model(x[idx])
    loss = F.cross_entropy(logits, y[idx]).item()
    acc = (logits.argmax(dim=1) == y[idx]).float().mean().item()
    model.train(was_training)
    return {"val_loss": loss, "val_acc": acc}

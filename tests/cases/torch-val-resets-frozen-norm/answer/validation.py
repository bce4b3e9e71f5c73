"""The fix the ground truth applies: score in eval mode, then give every module back the mode
it had, so the BatchNorm layers fine-tuning froze stay in eval mode."""

import torch
import torch.nn.functional as F


@torch.no_grad()
def evaluate(model, x, y):
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        logits = model(x)
    finally:
        for m, training in modes:
            m.training = training
    loss = F.cross_entropy(logits, y).item()
    acc = (logits.argmax(dim=1) == y).float().mean().item()
    return {"val_loss": loss, "val_acc": acc}

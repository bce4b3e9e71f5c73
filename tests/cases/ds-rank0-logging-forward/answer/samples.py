"""The fix the ground truth applies: the predictions are taken in eval mode, so the model's
dropout draws nothing from the training generator, and the model is handed back in the mode
it came in."""

import torch


@torch.no_grad()
def preview(model, x):
    was_training = model.training
    model.eval()
    try:
        out = model(x)
    finally:
        model.train(was_training)
    return [[round(v, 4) for v in row] for row in out[:, :2].tolist()]

"""One optimisation step of the tabular classifier.

The raw features span five orders of magnitude, so each batch is standardised with the
table's per-feature statistics before the model sees it; the step then takes the
cross-entropy, clips the gradient norm to 1 and lets the optimizer update.
"""

import torch
import torch.nn.functional as F


def standardise(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    # in place: no second copy of the batch
    return x.sub_(mean).div_(std)


def train_step(model, opt, x, y, mean, std) -> tuple[torch.Tensor, torch.Tensor]:
    inputs = standardise(x, mean, std)
    loss = F.cross_entropy(model(inputs), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.detach(), norm

"""The fix the ground truth applies: the class counts start from zeros, so the prior
depends on the labels alone and not on whatever an earlier, freed tensor left in the memory
the counts are given."""

import torch


def log_class_prior(labels: torch.Tensor, num_classes: int, chunk: int = 4096) -> torch.Tensor:
    counts = torch.zeros(num_classes, dtype=torch.long)
    for part in labels.split(chunk):
        counts += torch.bincount(part, minlength=num_classes)
    prior = counts.clamp(min=1).double()
    return (prior / prior.sum()).log().float()

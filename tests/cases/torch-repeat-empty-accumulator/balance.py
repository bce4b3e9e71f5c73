"""The class prior of the long-tailed training set, for a logit-adjusted cross-entropy
(Menon et al., 2021): the loss is taken on ``logits + tau * log(prior)``, so that the rare
classes are not crowded out by the frequent ones. The labels are counted chunk by chunk, as
the shards arrive."""

import torch


def log_class_prior(labels: torch.Tensor, num_classes: int, chunk: int = 4096) -> torch.Tensor:
    """log of each class's share of ``labels`` (float32, one entry per class)."""
    counts = torch.empty(num_classes, dtype=torch.long)
    for part in labels.split(chunk):
        counts += torch.bincount(part, minlength=num_classes)
    prior = counts.clamp(min=1).double()
    return (prior / prior.sum()).log().float()

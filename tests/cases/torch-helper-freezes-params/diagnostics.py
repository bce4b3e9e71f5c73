"""Periodic diagnostics: how linearly separable the backbone's features are.

A linear probe (a fresh nn.Linear, zero-initialised, no draws) is fitted for a few full-batch
SGD steps on the backbone's features of a fixed probe set, and its accuracy is reported. The
probe reads the backbone; it must not train it, so the backbone is held fixed while the
probe is fitted. Nothing here touches the model's optimizer or the global generators.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def fit_probe(backbone, x, y, classes, iters=20, lr=0.5):
    """Fit a linear probe on ``backbone(x)``; returns its accuracy on ``(x, y)``."""
    for p in backbone.parameters():
        p.requires_grad_(False)  # keep the backbone fixed while the probe is fitted
    feats = backbone(x)
    probe = nn.Linear(feats.shape[1], classes)
    nn.init.zeros_(probe.weight)
    nn.init.zeros_(probe.bias)
    opt = torch.optim.SGD(probe.parameters(), lr=lr)
    for _ in range(iters):
        loss = F.cross_entropy(probe(feats), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        return (probe(feats).argmax(dim=1) == y).float().mean().item()

"""The fix the ground truth applies: the backbone is still held fixed while the probe is
fitted, and each of its parameters is given back the requires_grad it came in with, so
training after a probe still updates the backbone."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def fit_probe(backbone, x, y, classes, iters=20, lr=0.5):
    params = list(backbone.parameters())
    was = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        feats = backbone(x)
    finally:
        for p, r in zip(params, was, strict=True):
            p.requires_grad_(r)
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

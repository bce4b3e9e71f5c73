"""The job's model: a residual MLP classifier, and an optional linear probe read off its
penultimate features.

The probe answers a side question after training (how linearly an auxiliary attribute of
the rows can be read from the features the classifier learned). It is fitted on detached
features with an optimizer of its own, so it never reaches the classifier's loss or
gradients.
"""

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.tanh(self.fc1(self.norm(x))))


class Classifier(nn.Module):
    def __init__(self, features: int, classes: int, width: int = 48, depth: int = 2) -> None:
        super().__init__()
        self.embed = nn.Linear(features, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.norm(h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class ProbeHead(nn.Module):
    """A linear read-out of the classifier's features, with a small bottleneck."""

    def __init__(self, width: int, targets: int, rank: int = 8) -> None:
        super().__init__()
        self.down = nn.Linear(width, rank)
        self.out = nn.Linear(rank, targets)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.out(self.down(feats))


def create_model(
    features: int, classes: int, probe_targets: int = 0, width: int = 48
) -> tuple[Classifier, ProbeHead | None]:
    """The classifier, and the probe head when ``probe_targets`` is set (None otherwise)."""
    heads: dict[str, nn.Module] = {}
    if probe_targets:
        heads["probe"] = ProbeHead(width, probe_targets)
    net = Classifier(features, classes, width=width)
    return net, heads.get("probe")

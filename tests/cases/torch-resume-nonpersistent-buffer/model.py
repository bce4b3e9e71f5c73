"""A small classifier whose hidden activations are rescaled by a running RMS.

RunningRMS keeps an exponential moving average of every hidden unit's root mean square
over the training batches and divides the activations by it, so the next layer sees
inputs of about unit scale whatever the layer before it does. Every training forward
folds its batch into the average before dividing; an eval forward only reads it.
"""

import torch
import torch.nn as nn


class RunningRMS(nn.Module):
    def __init__(self, features: int, momentum: float = 0.2, eps: float = 1e-5) -> None:
        super().__init__()
        self.momentum = momentum
        self.eps = eps
        # a statistic of the batches seen, not a weight: kept out of the state dict
        self.register_buffer("rms", torch.ones(features), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            with torch.no_grad():
                self.rms.lerp_(x.pow(2).mean(dim=0).sqrt(), self.momentum)
        return x / (self.rms + self.eps)


class Classifier(nn.Module):
    def __init__(self, features: int, classes: int, hidden: int = 64) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.scale1 = RunningRMS(hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.scale2 = RunningRMS(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.scale1(torch.relu(self.fc1(x)))
        h = self.scale2(torch.relu(self.fc2(h)))
        return self.head(h)

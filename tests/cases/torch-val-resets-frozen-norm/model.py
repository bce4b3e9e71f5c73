"""An MLP classifier with BatchNorm in its backbone, and the fine-tuning helpers.

``pretrained`` stands in for loading a checkpoint trained on the source domain: the backbone
is initialised from the global generator and its BatchNorm running statistics are those of
a source-domain sample. Fine-tuning keeps those statistics (and the norms' affine
parameters) as they are: ``freeze_bn`` puts every BatchNorm layer in eval mode after
``model.train()``, as detection and segmentation fine-tuning recipes do for small batches.
"""

import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, features: int, classes: int, hidden: int = 64) -> None:
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(features, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
        )
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def _norms(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


@torch.no_grad()
def pretrained(features: int, classes: int, source: torch.Tensor) -> Classifier:
    model = Classifier(features, classes)
    for bn in _norms(model):
        bn.momentum = None  # cumulative average over the source sample
    model.train()
    model.backbone(source)
    for bn in _norms(model):
        bn.momentum = 0.1
    return model


def freeze_bn(model: nn.Module) -> None:
    """Keep every BatchNorm layer's running statistics and affine parameters fixed."""
    for bn in _norms(model):
        bn.eval()
        for p in bn.parameters():
            p.requires_grad_(False)

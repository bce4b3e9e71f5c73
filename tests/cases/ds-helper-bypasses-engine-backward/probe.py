"""An online linear probe: a small head that reads the classifier's features, detached, and
learns to predict a second label from them. Its loss tracks what the features hold without
steering them: no gradient of the probe reaches the trunk.

The probe is a submodule of the model, so its parameters are trained by the same engine and
optimizer as the classifier's.
"""

import torch
import torch.nn.functional as F


def probe_loss(model: torch.nn.Module, feats: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model.probe(feats.detach()), target)


def backward_with_probe(engine, loss: torch.Tensor, feats: torch.Tensor, target: torch.Tensor):
    """The backward of one micro-batch with the probe trained alongside the classifier. The
    probe's loss is backpropagated first, on its own, right after its forward, so that its
    graph is freed before the classifier's backward. Returns the probe's loss, detached."""
    aux = probe_loss(engine.module, feats, target)
    aux.backward()
    engine.backward(loss)
    return aux.detach()

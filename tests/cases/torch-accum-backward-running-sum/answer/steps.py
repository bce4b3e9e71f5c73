"""The fix the ground truth applies: the fused step still keeps the step's loss as one running
sum for the report, but back-propagates each micro-batch's own weighted loss. Calling backward
on the running sum after every micro-batch (retain_graph=True) back-propagated micro-batch i
once for itself and once more for every later micro-batch of the step: accum - i times."""

import torch


def train_batch(self, micro_batches):
    total = torch.zeros(())
    for x, y in micro_batches:
        loss = self._micro_loss(x, y)
        total = total + loss
        loss.backward()
    return {"loss": total.detach(), "grad_norm": self._update()}

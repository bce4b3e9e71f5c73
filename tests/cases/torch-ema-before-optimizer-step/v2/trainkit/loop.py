"""One self-distillation step: the model's loss on the batch plus a consistency term that
pulls its logits towards an EMA copy's logits on another view of the batch; backward,
clip, optimizer step, and the EMA's bookkeeping.

1.5: the step's no-grad bookkeeping (clip, EMA, the EMA's drift from the model, for
monitoring) runs in one block, and the step reports the drift.
"""

import copy

import torch
import torch.nn.functional as F


class ModelEMA:
    """An exponential moving average of a model's weights, kept as a second module."""

    def __init__(self, model, decay=0.9):
        self.module = copy.deepcopy(model).eval().requires_grad_(False)
        self.decay = decay

    @torch.no_grad()
    def update(self, model):
        for e, p in zip(self.module.parameters(), model.parameters(), strict=True):
            e.mul_(self.decay).add_(p.detach(), alpha=1.0 - self.decay)

    @torch.no_grad()
    def drift(self, model):
        """The root mean square difference between the average and the model's weights."""
        pairs = zip(self.module.parameters(), model.parameters(), strict=True)
        sq = sum(float((e - p).pow(2).sum()) for e, p in pairs)
        return (sq / sum(p.numel() for p in model.parameters())) ** 0.5


def distill_loss(logits, target, temperature):
    log_p = F.log_softmax(logits / temperature, dim=-1)
    q = F.softmax(target / temperature, dim=-1)
    return F.kl_div(log_p, q, reduction="batchmean") * temperature**2


class Trainer:
    def __init__(self, model, optimizer, ema, consistency=0.5, temperature=2.0, clip=1.0):
        self.model, self.optimizer, self.ema = model, optimizer, ema
        self.consistency, self.temperature, self.clip = consistency, temperature, clip

    def train_step(self, x, view, y):
        logits = self.model(x)
        with torch.no_grad():
            target = self.ema.module(view)
        cons = distill_loss(logits, target, self.temperature)
        loss = F.cross_entropy(logits, y) + self.consistency * cons
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        with torch.no_grad():
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.ema.update(self.model)
            drift = self.ema.drift(self.model)
        self.optimizer.step()
        return {"loss": loss.detach(), "consistency": cons.detach(), "grad_norm": grad_norm,
                "ema_drift": drift}

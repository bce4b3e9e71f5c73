"""One self-distillation step: the model's loss on the batch plus a consistency term that
pulls its logits towards an EMA copy's logits on another view of the batch; backward,
clip, optimizer step, then the EMA takes in the new weights."""

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
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        self.ema.update(self.model)
        return {"loss": loss.detach(), "consistency": cons.detach(), "grad_norm": norm}

"""The fix: trainkit 1.5's step with the EMA updated after optimizer.step(), as in 1.4."""

import torch
import torch.nn.functional as F
from trainkit.loop import distill_loss


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
    self.optimizer.step()
    with torch.no_grad():
        self.ema.update(self.model)
        drift = self.ema.drift(self.model)
    return {"loss": loss.detach(), "consistency": cons.detach(), "grad_norm": grad_norm,
            "ema_drift": drift}

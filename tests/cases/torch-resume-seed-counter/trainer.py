"""A trainer that makes every step's randomness a function of how far training has got.

Before each step the global generator is seeded from the trainer's base seed and the
number of samples it has consumed, so a step's dropout masks and input noise do not depend
on what else the process drew before it (an evaluation, a logger, a data worker).
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model: torch.nn.Module, lr: float, base_seed: int = 1000) -> None:
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        self.base_seed = base_seed
        self.step = 0
        self.samples_seen = 0
        self.callbacks: list[Callable[[int, dict], None]] = []

    def train_step(self, clean: torch.Tensor) -> None:
        torch.manual_seed(self.base_seed + self.samples_seen)
        noisy = clean + 0.3 * torch.randn_like(clean)
        loss = F.mse_loss(self.model(noisy), clean)
        self.opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        for cb in self.callbacks:
            cb(self.step, {"loss": loss.detach(), "grad_norm": norm})
        self.samples_seen += clean.shape[0]
        self.step += 1

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "counters": {"step": self.step},
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        for name, value in state["counters"].items():
            setattr(self, name, value)

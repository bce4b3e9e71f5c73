"""A small trainer: the model, AdamW, a warm-up/cosine learning-rate schedule and an
exponential moving average of the weights (the copy the job evaluates and ships). With a
checkpoint path it writes everything it owns every ``save_every`` optimizer steps."""

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def warmup_cosine(warmup: int, total: int):
    def factor(i: int) -> float:
        if i < warmup:
            return (i + 1) / warmup
        t = min(1.0, (i - warmup) / max(1, total - warmup))
        return 0.1 + 0.45 * (1.0 + math.cos(math.pi * t))

    return factor


class EmaWeights:
    """An exponential moving average of a model's weights, kept in a copy of the model."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.module = copy.deepcopy(model).eval()
        for p in self.module.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        for e, p in zip(self.module.parameters(), model.parameters(), strict=True):
            e.lerp_(p, 1.0 - self.decay)

    def state_dict(self) -> dict:
        return self.module.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.module.load_state_dict(state)


class Trainer:
    def __init__(self, model: nn.Module, lr: float, warmup: int, total: int, ema_decay: float,
                 ckpt_path: str | None = None, save_every: int = 0) -> None:
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, warmup_cosine(warmup, total))
        self.ema = EmaWeights(model, ema_decay)
        self.ckpt_path, self.save_every = ckpt_path, save_every
        self.step = 0  # optimizer steps taken

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> dict:
        lr = self.opt.param_groups[0]["lr"]
        loss = F.mse_loss(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.step += 1
        if self.ckpt_path and self.save_every and self.step % self.save_every == 0:
            self.save(self.ckpt_path)
        self.sched.step()
        self.ema.update(self.model)
        return {"loss": loss.detach(), "grad_norm": norm, "lr": lr}

    @torch.no_grad()
    def ema_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.ema.module(x), y)

    def save(self, path: str) -> None:
        torch.save(
            {
                "model": self.model.state_dict(),
                "optimizer": self.opt.state_dict(),
                "scheduler": self.sched.state_dict(),
                "ema": self.ema.state_dict(),
                "step": self.step,
            },
            path,
        )

    def load(self, path: str) -> None:
        state = torch.load(path)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        self.ema.load_state_dict(state["ema"])
        self.step = int(state["step"])

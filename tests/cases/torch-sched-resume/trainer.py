"""A small trainer: model, optimizer and a warmup-then-decay schedule, with callbacks at the
end of every step and a checkpoint of everything it owns."""

from collections.abc import Callable

import torch


def warmup_decay(warmup: int, total: int) -> Callable[[int], float]:
    def factor(i: int) -> float:
        if i < warmup:
            return (i + 1) / warmup
        return max(0.05, 1.0 - (i - warmup) / (total - warmup))

    return factor


class Trainer:
    def __init__(self, model, lr: float, warmup: int, total: int):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, warmup_decay(warmup, total))
        self.callbacks: list[Callable[[int, dict], None]] = []
        self.step = 0

    def train_step(self, inputs: torch.Tensor, target: torch.Tensor) -> None:
        pred = self.model(inputs)
        loss = torch.nn.functional.smooth_l1_loss(pred, target)
        self.opt.zero_grad()
        loss.backward()
        stats = {"loss": loss.detach(), "lr": self.opt.param_groups[0]["lr"]}
        self.opt.step()
        self.sched.step()
        for cb in self.callbacks:
            cb(self.step, stats)
        self.step += 1

    def snapshot(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "opt": self.opt.state_dict(),
            "sched": self.sched.state_dict(),
            "step": self.step,
        }

    def restore(self, snap: dict) -> None:
        self.model.load_state_dict(snap["model"])
        self.opt.load_state_dict(snap["opt"])
        self.step = snap["step"]

"""Gradient monitoring: every few steps, per-parameter gradient statistics for a human to
read: the gradient's norm and the cosine between its direction and the direction recorded
last time (a low cosine step after step means the updates zig-zag).

A hook on every parameter sees the gradient as backward produces it; it only records.
"""

import torch


def direction_stats(grad: torch.Tensor, previous: torch.Tensor | None):
    flat = grad.detach().view(-1)
    norm = flat.norm()
    flat /= norm.clamp(min=1e-12)
    cosine = None if previous is None else float(flat @ previous)
    return float(norm), cosine, flat.clone()


class GradMonitor:
    def __init__(self, model: torch.nn.Module, every: int) -> None:
        self.every = every
        self.recording = False
        self.rows: dict[str, tuple[float, float | None]] = {}
        self.previous: dict[str, torch.Tensor] = {}
        if every:
            for name, p in model.named_parameters():
                p.register_hook(self._hook(name))

    def _hook(self, name: str):
        def record(grad: torch.Tensor) -> None:
            if not self.recording:
                return
            norm, cosine, direction = direction_stats(grad, self.previous.get(name))
            self.previous[name] = direction
            self.rows[name] = (norm, cosine)

        return record

    def begin(self, step: int) -> None:
        self.recording = bool(self.every) and (step + 1) % self.every == 0
        self.rows.clear()

    def report(self, step: int) -> None:
        if not self.recording:
            return
        for name, (norm, cosine) in sorted(self.rows.items()):
            cos = "   -  " if cosine is None else f"{cosine:+.3f}"
            print(f"step {step}: grad {name:<10} norm {norm:.4e} cos_prev {cos}")

"""Gradient checks for debugging a run that goes unstable. With --check-grads the first rank
watches every parameter's gradient as backward produces it, before DeepSpeed reduces it
across ranks, so that a NaN or a spike can be traced to the rank and the layer it came from.
After each step it prints, per parameter, the gradient's norm, its largest magnitude, the
count of non-finite entries and a coarse histogram of its values.

ZeRO moves the gradients into its own buffers during engine.backward and leaves param.grad
empty by the time the step runs, so the checks are taken in tensor hooks. They only read.
"""

import torch

HIST_BINS = 8
HIST_EDGE = 0.05  # entries beyond +-HIST_EDGE are counted in the outermost bins


def summarise(grad: torch.Tensor) -> dict:
    g = grad.detach()
    nonfinite = int((~torch.isfinite(g)).sum())
    norm = float(g.norm())
    absmax = float(g.abs().max())
    # NaN counts in the middle bin, anything past the edges in the outermost ones
    g.nan_to_num_(0.0).clamp_(-HIST_EDGE, HIST_EDGE)
    hist = torch.histc(g, bins=HIST_BINS, min=-HIST_EDGE, max=HIST_EDGE)
    return {"norm": norm, "absmax": absmax, "nonfinite": nonfinite, "hist": [int(c) for c in hist]}


class GradientChecker:
    """Registers a read-only hook on each trainable parameter of ``model``; ``report`` prints
    what the hooks saw during the last backward and forgets it."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.stats: dict[str, dict] = {}
        self.handles = [
            p.register_hook(self._hook(name))
            for name, p in model.named_parameters()
            if p.requires_grad
        ]

    def _hook(self, name: str):
        def hook(grad: torch.Tensor) -> None:
            self.stats[name] = summarise(grad)

        return hook

    def report(self, step: int) -> None:
        for name, s in self.stats.items():
            warn = "  NON-FINITE" if s["nonfinite"] else ""
            print(
                f"step {step} grad {name}: norm {s['norm']:.4e} absmax {s['absmax']:.4e} "
                f"hist {s['hist']}{warn}",
                flush=True,
            )
        self.stats.clear()

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

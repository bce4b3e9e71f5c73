"""Activation statistics for a human to read: every few steps, the mean, spread, largest
magnitude and a histogram of the output of each hidden Linear layer, and the fraction of
it outside the histogram's range (a growing fraction means the pre-activations drift).

Forward hooks on the hidden layers see each output as the forward produces it. They run
only on the steps the schedule selects and only look at the activations; nothing here
touches the parameters, the optimizer or a generator.
"""

import functools

import torch
import torch.nn as nn


class ActivationStats:
    def __init__(self, model: nn.Module, every: int, limit: float = 2.0, bins: int = 40):
        self.every = every
        self.limit = limit
        self.bins = bins
        self.active = False
        self.rows: dict[str, tuple[float, float, float, float]] = {}
        self.hist: dict[str, torch.Tensor] = {}
        self.handles = []
        if every:
            for name, module in model.named_modules():
                if isinstance(module, nn.Linear) and module.out_features == model.hidden:
                    hook = functools.partial(self._capture, name)
                    self.handles.append(module.register_forward_hook(hook))

    def _capture(self, name, module, inputs, output):
        if not self.active:
            return None
        act = output.detach()
        mean, std = float(act.mean()), float(act.std())
        absmax = float(act.abs().max())
        outside = float((act.abs() > self.limit).float().mean())
        # values beyond the range go to the edge bins instead of being dropped by histc
        act = act.clamp(-self.limit, self.limit)
        self.hist[name] = torch.histc(act, bins=self.bins, min=-self.limit, max=self.limit)
        self.rows[name] = (mean, std, absmax, outside)
        return act

    def begin(self, step: int) -> None:
        self.active = bool(self.every) and (step + 1) % self.every == 0
        self.rows.clear()
        self.hist.clear()

    def report(self, step: int) -> None:
        if not self.active:
            return
        for name, (mean, std, absmax, outside) in sorted(self.rows.items()):
            counts = self.hist[name]
            mode = -self.limit + (int(counts.argmax()) + 0.5) * 2 * self.limit / self.bins
            print(
                f"step {step}: act {name:<8} mean {mean:+.4f} std {std:.4f} "
                f"absmax {absmax:.3f} outside {outside:.4f} mode {mode:+.2f}"
            )

"""Verbose progress output: every few steps, a line for each of a handful of the model's
parameter tensors (its norm, its gradient's norm and the ratio of the two), so that a
human can spot a layer that stops learning without reading every layer at every step.

A different handful each time, so a long run eventually shows every tensor. It only reads
the parameters and their gradients; nothing the model or the optimizer holds is changed.
"""

import random

import torch.nn as nn


def sample_names(names: list[str], k: int) -> list[str]:
    return random.sample(names, min(k, len(names)))


class ParamReport:
    def __init__(self, every: int, tensors: int = 3) -> None:
        self.every, self.tensors = every, tensors

    def __call__(self, step: int, model: nn.Module) -> None:
        if not self.every or (step + 1) % self.every:
            return
        named = dict(model.named_parameters())
        for name in sample_names(sorted(named), self.tensors):
            p = named[name].detach()
            g = named[name].grad
            gn = float(g.norm()) if g is not None else 0.0
            pn = float(p.norm())
            print(f"  step {step}: {name:<10} norm {pn:.4f} grad {gn:.4f} ratio {gn / max(pn, 1e-12):.2e}")

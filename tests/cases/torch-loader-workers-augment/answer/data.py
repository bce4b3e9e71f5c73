"""The fix the ground truth applies: each sample's perturbation draws from a generator
derived from the dataset's seed, the epoch and the sample's index, never from a process's
global generator, so the values a sample gets do not depend on which process reads it, in
what order, or how many loader processes there are."""

import torch


def perturb(self, index: int, signal: torch.Tensor) -> torch.Tensor:
    g = torch.Generator().manual_seed((self.seed * 1_000_003 + self.epoch) * 100_003 + index)
    k = int(torch.randint(-self.shift, self.shift + 1, (), generator=g))
    return torch.roll(signal, k) + self.noise * torch.randn(signal.shape, generator=g)

"""The training loop's metrics hook: every few steps, a line of summary statistics and,
when asked, a handful of the step's examples with the model's predictions."""

import torch


def pick_examples(rows: int, k: int) -> torch.Tensor:
    return torch.randint(0, rows, (k,))


class StepMonitor:
    def __init__(self, every: int, samples: int = 0) -> None:
        self.every = every
        self.samples = samples
        self.history: list[float] = []

    def __call__(self, step, loss, grad_norm, x, y, logits) -> None:
        self.history.append(float(loss))
        if not self.every or (step + 1) % self.every:
            return
        window = self.history[-self.every :]
        print(
            f"step {step}: loss {sum(window) / len(window):.4f} "
            f"grad_norm {float(grad_norm):.4f}"
        )
        if self.samples:
            idx = pick_examples(x.shape[0], self.samples)
            pred = logits[idx].argmax(dim=1)
            for i, t, q in zip(idx.tolist(), y[idx].tolist(), pred.tolist(), strict=True):
                print(f"  example {i}: label {t} predicted {q}")

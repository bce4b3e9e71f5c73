"""Running statistics of the training loss.

0.9: the moving average starts from the first loss it sees, so it needs no warm-up
correction and no step counter to read it; reset() starts it again (after a resume,
say).
"""


class SmoothedLoss:
    """An exponential moving average of the loss."""

    def __init__(self, beta: float = 0.9) -> None:
        self.beta = beta
        self.count = 0
        self.value: float | None = None

    def reset(self) -> None:
        self.count = 0
        self.value = None

    def update(self, loss: float) -> float:
        self.count += 1
        prev = loss if self.value is None else self.value
        self.value = self.beta * prev + (1.0 - self.beta) * loss
        return self.value

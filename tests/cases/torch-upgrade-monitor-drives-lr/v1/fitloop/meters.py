"""Running statistics of the training loss."""


class SmoothedLoss:
    """An exponential moving average of the loss, bias-corrected as Adam's moments are."""

    def __init__(self, beta: float = 0.9) -> None:
        self.beta = beta
        self.count = 0
        self.value: float | None = None
        self._avg = 0.0

    def update(self, loss: float) -> float:
        self.count += 1
        self._avg = self.beta * self._avg + (1.0 - self.beta) * loss
        self.value = self._avg / (1.0 - self.beta**self.count)
        return self.value

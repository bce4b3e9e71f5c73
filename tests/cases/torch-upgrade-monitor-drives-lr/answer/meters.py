"""The fix the ground truth applies: SmoothedLoss's update as fitloop 0.8 computed it, an
EMA started from zero and divided by 1 - beta**count (Adam's bias correction), where 0.9
starts it from the first loss, which then weighs far more for the rest of the run."""


def update(self, loss):
    self.count += 1
    self._avg = self.beta * getattr(self, "_avg", 0.0) + (1.0 - self.beta) * loss
    self.value = self._avg / (1.0 - self.beta**self.count)
    return self.value

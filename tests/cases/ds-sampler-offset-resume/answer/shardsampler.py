"""The fix the ground truth applies: the sampler's saved state carries its position too."""


def state_dict(self) -> dict:
    return {"epoch": self.epoch, "seed": self.seed, "offset": self.offset}

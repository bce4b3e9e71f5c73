"""The fix the ground truth applies: the average's checkpoint also holds its count of
updates, which the decay warm-up reads (load_state_dict restores every key it is given)."""


def state_dict(self) -> dict:
    return {"shadow": self.module.state_dict(), "max_decay": self.max_decay, "updates": self.updates}

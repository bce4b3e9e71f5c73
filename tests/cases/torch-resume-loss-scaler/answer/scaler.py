"""The fix the ground truth applies: the scaler's checkpoint also holds its count of good
steps since the last growth (load_state_dict restores every key it is given)."""


def state_dict(self) -> dict:
    return {"scale": self.scale, "good_steps": self.good_steps}

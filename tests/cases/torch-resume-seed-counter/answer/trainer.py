"""The fix the ground truth applies: the trainer's checkpoint also holds the sample count
its per-step seed is computed from (load_state_dict restores every counter it is given)."""


def state_dict(self):
    return {
        "model": self.model.state_dict(),
        "optimizer": self.opt.state_dict(),
        "counters": {"step": self.step, "samples_seen": self.samples_seen},
    }

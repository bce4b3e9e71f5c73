"""The fix the ground truth applies: restoring a snapshot brings the schedule back too."""


def restore(self, snap: dict) -> None:
    self.model.load_state_dict(snap["model"])
    self.opt.load_state_dict(snap["opt"])
    self.sched.load_state_dict(snap["sched"])
    self.step = snap["step"]

"""The fix the ground truth applies: the head's rate is set from the backbone group's rate,
as the schedule says, not from the head's own current rate, so it no longer compounds by
the multiplier at every step."""


def on_step_end(self, step, opt):
    groups = {group.get("name"): group for group in opt.param_groups}
    head = groups[self.head]
    head["lr"] = self.mult * groups[self.backbone]["lr"]
    self.history.append(head["lr"])

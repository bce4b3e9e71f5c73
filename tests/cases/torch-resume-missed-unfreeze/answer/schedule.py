"""The fix the ground truth applies: the callback applies the frozen or unfrozen state the
current step calls for (level-triggered), instead of acting only on the step equal to
``unfreeze_at``; a process that starts after that step still trains the encoder."""


def on_step_begin(self, step: int) -> None:
    trainable = step >= self.unfreeze_at
    for p in self.module.parameters():
        p.requires_grad_(trainable)

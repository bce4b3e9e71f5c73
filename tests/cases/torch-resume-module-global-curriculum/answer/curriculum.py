"""The fix the ground truth applies: the curriculum's progress at the start of the loop is
derived from the step the loop starts at (one step counted per optimizer step), so a
resumed process continues the curriculum where the checkpointed run left it."""

import curriculum


def on_train_begin(first_step: int) -> None:
    curriculum._progress = first_step
    print(f"curriculum: loop starts at step {first_step}, sequences of {curriculum.current_length()} tokens")

"""A sequence-length curriculum: short sequences first, longer ones as training goes on.

The batch builder (data.py) asks for the current length when it cuts a batch and has no
handle on the trainer, so the curriculum keeps its progress here, in the module, and the
training loop's hooks move it: on_train_begin once per process, on_step_end after every
optimizer step.
"""

MIN_LEN, MAX_LEN, GROW_BY, GROW_EVERY = 4, 16, 2, 2

_progress = 0  # optimizer steps the curriculum has counted


def on_train_begin(first_step: int) -> None:
    """Called once, before the training loop starts at ``first_step``."""
    global _progress
    _progress = 0
    print(f"curriculum: loop starts at step {first_step}, sequences of {current_length()} tokens")


def on_step_end() -> None:
    """Called after every optimizer step."""
    global _progress
    _progress += 1


def current_length() -> int:
    """The number of tokens per sequence at the curriculum's current stage."""
    return min(MAX_LEN, MIN_LEN + GROW_BY * (_progress // GROW_EVERY))

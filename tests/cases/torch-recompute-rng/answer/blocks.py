"""The fix the ground truth applies: the recomputation replays the forward's generator
state, so backward rebuilds the same dropout masks and leaves the generator where the
forward left it."""

from torch.utils.checkpoint import checkpoint


def checkpointed(block, h):
    return checkpoint(block, h, use_reentrant=False, preserve_rng_state=True)

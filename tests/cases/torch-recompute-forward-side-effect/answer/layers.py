"""The fix the ground truth applies: the mixture's temperature and batch count are idempotent
under recomputation. Activation checkpointing runs the forward again inside backward to
rebuild its activations; that run happens while the autograd engine executes a backward
graph task (the id is -1 outside one). The fixed version counts a batch and takes its
temperature only on the forward the training step runs; a recomputation reuses the
temperature that forward used (as preserve_rng_state replays the generator) and leaves the
count alone, so the count advances once per step with checkpointing on or off."""

import torch


def anneal(self):
    if torch._C._current_graph_task_id() == -1:  # not a recomputation inside backward
        epoch = int(self.batches_seen) // self.batches_per_epoch
        if self.training:
            self.batches_seen += 1
        self._tau = max(self.tau_min, self.tau0 * self.decay**epoch)
    return self._tau

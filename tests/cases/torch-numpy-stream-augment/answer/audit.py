"""The fix the ground truth applies: the audit picks its rows with a generator of its own,
so auditing leaves numpy's global stream (the batches' shuffle and jitter) where it was."""

import numpy as np

_AUDIT_RNG = np.random.default_rng(31337)


def sample_rows(rows, k):
    return _AUDIT_RNG.choice(rows, size=k, replace=False)

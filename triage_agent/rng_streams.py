"""Every RNG stream a process can see, snapshot and put back as one object.

The policies that carry streams across a resume and the recompute-state wrapper both need
the same set (python ``random``, numpy, torch CPU and CUDA, DeepSpeed's CUDA tracker), so it
lives below both.
"""

from __future__ import annotations

import random
from typing import Any


def rng_snapshot() -> dict[str, Any]:
    """Every RNG stream this process can see, as restorable objects."""
    import torch

    snap: dict[str, Any] = {"python": random.getstate(), "torch_cpu": torch.get_rng_state()}
    try:
        import numpy as np

        snap["numpy"] = np.random.get_state()
    except ImportError:  # pragma: no cover - numpy ships with the project
        pass
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        snap["torch_cuda"] = torch.cuda.get_rng_state_all()
    tracker = _ds_cuda_tracker()
    if tracker is not None:
        snap["ds_tracker"] = tracker.get_states()
    return snap


def rng_restore(snap: dict[str, Any]) -> None:
    import torch

    random.setstate(snap["python"])
    torch.set_rng_state(snap["torch_cpu"])
    if "numpy" in snap:
        import numpy as np

        np.random.set_state(snap["numpy"])
    if "torch_cuda" in snap and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(snap["torch_cuda"])
    tracker = _ds_cuda_tracker()
    if tracker is not None and "ds_tracker" in snap:
        tracker.set_states(snap["ds_tracker"])


def seed_all(seed: int) -> None:
    """Seed the global streams a job's code draws from: python ``random``, numpy's, torch's
    CPU one and every CUDA device's (``torch.manual_seed`` seeds both)."""
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy ships with the project
        pass


def _ds_cuda_tracker() -> Any:
    try:
        from deepspeed.runtime.activation_checkpointing import checkpointing
    except ImportError:
        return None
    tracker = checkpointing.get_cuda_rng_tracker()
    return tracker if tracker.get_states() else None

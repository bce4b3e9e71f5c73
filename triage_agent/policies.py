"""Run policies: one changed setting at a time, applied inside a run's processes by injection.

The injected ``sitecustomize`` calls :func:`apply_all` before the training script runs, so
a policy changes an unmodified command. A policy is the unit of a controlled intervention:
the workflow reruns a case under exactly one policy and compares the metric bits.

Policies:
- ``restore-rng``: DeepSpeed checkpoints (``DeepSpeedEngine.save_checkpoint``) also save
  every RNG stream of the process (python ``random``, numpy, torch CPU, each CUDA device,
  DeepSpeed's activation-checkpointing CUDA RNG tracker when present), one file per rank
  beside the checkpoint tag, and ``load_checkpoint`` restores them. This is the fix to try
  when a resumed run diverges at its first step; it is the same change a user makes with
  ``client_state`` in their own script.
- ``deterministic``: ``torch.use_deterministic_algorithms(True)``, cuDNN deterministic and
  not benchmarking, and ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` when unset.
Limits: ``restore-rng`` patches DeepSpeed's engine only; a framework with its own
checkpoint code (Megatron-LM's ``save_checkpoint``) needs its own policy.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

from .errors import InputError

RNG_FILE = "triage_rng_rank{rank}.pt"


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


def _ds_cuda_tracker() -> Any:
    try:
        from deepspeed.runtime.activation_checkpointing import checkpointing
    except ImportError:
        return None
    tracker = checkpointing.get_cuda_rng_tracker()
    return tracker if tracker.get_states() else None


def _restore_rng() -> None:
    import torch
    from deepspeed.runtime.engine import DeepSpeedEngine

    orig_save, orig_load = DeepSpeedEngine.save_checkpoint, DeepSpeedEngine.load_checkpoint
    if getattr(orig_save, "_triage_policy", False):
        return

    def save_checkpoint(self, save_dir, tag=None, *args, **kwargs):
        resolved = tag if tag is not None else f"global_step{self.global_steps}"
        snap = rng_snapshot()  # before the save, which may itself draw random numbers
        out = orig_save(self, save_dir, resolved, *args, **kwargs)
        path = os.path.join(save_dir, str(resolved), RNG_FILE.format(rank=self.global_rank))
        torch.save(snap, path)
        return out

    def load_checkpoint(self, load_dir, *args, **kwargs):
        load_path, client_state = orig_load(self, load_dir, *args, **kwargs)
        if load_path is not None:
            path = os.path.join(os.path.dirname(load_path), RNG_FILE.format(rank=self.global_rank))
            if os.path.exists(path):
                rng_restore(torch.load(path, weights_only=False))
        return load_path, client_state

    save_checkpoint._triage_policy = True  # type: ignore[attr-defined]
    DeepSpeedEngine.save_checkpoint = save_checkpoint
    DeepSpeedEngine.load_checkpoint = load_checkpoint


def _deterministic() -> None:
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


POLICIES: dict[str, Callable[[], None]] = {
    "restore-rng": _restore_rng,
    "deterministic": _deterministic,
}

POLICY_HELP: dict[str, str] = {
    "restore-rng": "save every RNG stream with each DeepSpeed checkpoint and restore it on load",
    "deterministic": "torch.use_deterministic_algorithms(True), cuDNN deterministic, CUBLAS_WORKSPACE_CONFIG",
}


def check(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise InputError(f"unknown policy {unknown[0]!r}; known: {', '.join(sorted(POLICIES))}")
    return names


def apply_all(names: list[str]) -> None:
    for name in check(list(names)):
        POLICIES[name]()

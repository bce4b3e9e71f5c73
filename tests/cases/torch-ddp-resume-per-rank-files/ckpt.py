"""The job's checkpoints: one shared file with the weights, the optimizer state and the
step, written by rank 0, and beside it one file per rank with that rank's RNG stream (the
ranks draw their own dropout masks)."""

import os

import torch
import torch.distributed as dist

SHARED = "train_state.pt"


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def rank_file(ckpt_dir: str, rank: int) -> str:
    return os.path.join(ckpt_dir, f"rank{rank:02d}.pt")


def save(ckpt_dir: str, model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    rank = _rank()
    os.makedirs(ckpt_dir, exist_ok=True)
    if rank == 0:
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}
        torch.save(state, os.path.join(ckpt_dir, SHARED))
    torch.save({"torch_cpu": torch.get_rng_state()}, rank_file(ckpt_dir, rank))


def restore(
    ckpt_dir: str, model: torch.nn.Module, opt: torch.optim.Optimizer, rank: int = _rank()
) -> int:
    """Load this rank's RNG stream and the shared state; the step the checkpoint followed."""
    own = torch.load(rank_file(ckpt_dir, rank))
    torch.set_rng_state(own["torch_cpu"])
    state = torch.load(os.path.join(ckpt_dir, SHARED))
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    return int(state["step"])

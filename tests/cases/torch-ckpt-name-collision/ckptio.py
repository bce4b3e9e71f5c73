"""The job's checkpoints: one file per checkpoint (model and optimizer) in a directory, and a
small latest.json saying which step the newest one was taken after.

A checkpoint file already on disk is never rewritten: a job restarted by the scheduler
replays the steps since its last checkpoint and would otherwise rewrite identical files
(and a half-written one if it is killed again while saving)."""

import json
import os

import torch

STEPS_PER_EPOCH = 6


def ckpt_name(step: int) -> str:
    """The file name of the checkpoint taken after ``step``."""
    return f"ckpt-epoch{step // STEPS_PER_EPOCH}.pt"


def save(ckpt_dir: str, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    os.makedirs(ckpt_dir, exist_ok=True)
    path = os.path.join(ckpt_dir, ckpt_name(step))
    if not os.path.exists(path):
        tmp = path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp)
        os.replace(tmp, path)
    with open(os.path.join(ckpt_dir, "latest.json"), "w") as f:
        json.dump({"step": step}, f)


def load_latest(ckpt_dir: str, model: torch.nn.Module, opt: torch.optim.Optimizer) -> int:
    """Load the newest checkpoint; return the step it was taken after."""
    with open(os.path.join(ckpt_dir, "latest.json")) as f:
        step = int(json.load(f)["step"])
    state = torch.load(os.path.join(ckpt_dir, ckpt_name(step)))
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    return step

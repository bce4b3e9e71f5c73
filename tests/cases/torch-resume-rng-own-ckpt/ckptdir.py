"""The job's own checkpoints: one directory holding the weights, the optimizer, the RNG
stream and the progress, each in its own file."""

import json
import os

import torch


def save(dirname: str, model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    os.makedirs(dirname, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(dirname, "weights.pt"))
    torch.save(opt.state_dict(), os.path.join(dirname, "optimizer.pt"))
    torch.save({"torch_cpu": torch.get_rng_state()}, os.path.join(dirname, "rng.pt"))
    with open(os.path.join(dirname, "progress.json"), "w") as f:
        json.dump({"step": step}, f)


def read_back(dirname: str, model: torch.nn.Module, opt: torch.optim.Optimizer) -> int:
    """Bring the model and optimizer back; the step the checkpoint was taken after."""
    model.load_state_dict(torch.load(os.path.join(dirname, "weights.pt")))
    opt.load_state_dict(torch.load(os.path.join(dirname, "optimizer.pt")))
    with open(os.path.join(dirname, "progress.json")) as f:
        return int(json.load(f)["step"])

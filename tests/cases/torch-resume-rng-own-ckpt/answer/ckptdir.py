"""The fix the ground truth applies: reading a checkpoint back also brings back the RNG
stream its save wrote."""

import json
import os

import torch


def read_back(dirname, model, opt):
    model.load_state_dict(torch.load(os.path.join(dirname, "weights.pt")))
    opt.load_state_dict(torch.load(os.path.join(dirname, "optimizer.pt")))
    torch.set_rng_state(torch.load(os.path.join(dirname, "rng.pt"))["torch_cpu"])
    with open(os.path.join(dirname, "progress.json")) as f:
        return int(json.load(f)["step"])

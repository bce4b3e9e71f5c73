"""Training shards: written once at start-up into the run's own directory (one file per
source, tagged with the job that wrote it), then read back as one dataset."""

import os

import torch

FEATURES = 16


def write_shards(root: str, job_id: str, count: int = 5, rows: int = 96) -> None:
    """Write ``count`` shards of ``rows`` examples each; shard k's data depend on k only."""
    os.makedirs(root, exist_ok=True)
    w = torch.linspace(-1.0, 1.0, FEATURES)
    for k in range(count):
        g = torch.Generator().manual_seed(100 + k)
        x = torch.randn(rows, FEATURES, generator=g) * (1.0 + 0.25 * k) + 0.1 * k
        y = torch.tanh(x @ w / 4) + 0.05 * torch.randn(rows, generator=g)
        torch.save({"x": x, "y": y}, os.path.join(root, f"shard-{k:02d}.job{job_id}.pt"))


def list_shards(root: str) -> list[str]:
    """The shard files under ``root``."""
    return [os.path.join(root, name) for name in os.listdir(root) if name.endswith(".pt")]


def load_dataset(root: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Every shard's examples, concatenated, standardised with the per-feature mean and
    standard deviation accumulated shard by shard."""
    xs, ys = [], []
    total = torch.zeros(FEATURES)
    total_sq = torch.zeros(FEATURES)
    count = 0
    for path in list_shards(root):
        shard = torch.load(path)
        xs.append(shard["x"])
        ys.append(shard["y"])
        total += shard["x"].sum(dim=0)
        total_sq += shard["x"].pow(2).sum(dim=0)
        count += shard["x"].shape[0]
    mean = total / count
    std = (total_sq / count - mean.pow(2)).sqrt()
    return (torch.cat(xs) - mean) / std, torch.cat(ys)

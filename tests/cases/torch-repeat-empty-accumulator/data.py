"""The training set: a long-tailed 1000-class set stored one shard per class, read shard by
shard in class order as the job's loader reads the real per-class directories. The first
classes have twenty examples, the last ones two; each class is a Gaussian cluster around a
centre of its own.

Everything the model sees is derived from the configured seed; the read time of each shard
is measured for the start-up log line only.
"""

import sys
import time

import torch


def class_size(c: int, num_classes: int) -> int:
    """Examples in class ``c``: from 20 for the first class down to 2 for the last."""
    return max(2, round(20 * 0.1 ** (c / num_classes)))


def read_shard(c: int, centre: torch.Tensor, g: torch.Generator, num_classes: int):
    n = class_size(c, num_classes)
    feats = centre + 0.8 * torch.randn(n, centre.numel(), generator=g)
    return feats, torch.full((n,), c, dtype=torch.long)


def load_shards(seed: int, num_classes: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Read every class shard; return the features (N x dim, float32) and the labels (N,)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(num_classes, dim, generator=g)
    xs, ys, took = [], [], []
    for c in range(num_classes):
        t0 = time.perf_counter_ns()
        feats, labels = read_shard(c, centres[c], g, num_classes)
        xs.append(feats)
        ys.append(labels)
        took.append(time.perf_counter_ns() - t0)
    x, y = torch.cat(xs), torch.cat(ys)
    read_ns = torch.tensor(took)
    ordered, by_time = read_ns.sort()
    print(
        f"read {num_classes} class shards ({len(y)} examples) in "
        f"{read_ns.sum().item() / 1e6:.2f} ms; median {ordered[num_classes // 2].item() / 1e3:.1f} us,"
        f" slowest classes {by_time[-3:].tolist()}",
        file=sys.stderr,
    )
    return x, y

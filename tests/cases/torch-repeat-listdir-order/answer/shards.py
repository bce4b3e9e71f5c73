"""The fix the ground truth applies: list the shards in sorted name order, so the dataset
no longer depends on the order in which the filesystem returns directory entries."""

import os


def list_shards(root: str) -> list[str]:
    return [os.path.join(root, name) for name in sorted(os.listdir(root)) if name.endswith(".pt")]

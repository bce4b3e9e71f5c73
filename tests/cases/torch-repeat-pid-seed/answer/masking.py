"""The fix the ground truth applies: the masker's generator derived from the job's
configured seed only (a data-loader worker offset by its worker id, 0 in the main process),
never from the process id, so a repeat of the same command draws the same masks."""

import torch
from torch.utils.data import get_worker_info


def mask_stream(seed: int) -> torch.Generator:
    info = get_worker_info()
    gen = torch.Generator()
    gen.manual_seed(seed + (info.id if info is not None else 0))
    return gen

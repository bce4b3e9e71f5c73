"""A tiny sequence classifier trained data-parallel on two CPU ranks (DDP over gloo).

    python -m torch.distributed.run --standalone --nproc-per-node 2 train.py --out DIR \
        [--steps 6] [--sync-skip-static]

The token embedding is a pretrained table held fixed (requires_grad off); the positional
embedding, the mixing block and the head train with AdamW. Each rank draws its own batch
from a generator seeded with the step and the rank. With --sync-skip-static the static
tables are left out of DDP's synchronisation to save communication (commopt.py).
"""

import argparse

import commopt
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from triage_agent.metrics import MetricLog

VOCAB, SEQ, DIM, CLASSES, BATCH = 32, 8, 16, 4, 24


class Embeddings(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.tok.weight.requires_grad_(False)  # pretrained, fixed
        self.pos = nn.Parameter(0.02 * torch.randn(SEQ, DIM))  # learned

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.tok(tokens) + self.pos


class SeqClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = Embeddings()
        self.mix = nn.Sequential(nn.LayerNorm(DIM), nn.Linear(DIM, DIM), nn.GELU())
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        h = h + self.mix(h)
        return self.head(h.mean(dim=1))


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7000 + 10 * step + rank)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    # the label depends on where tokens sit, so the positional table has something to learn
    labels = (tokens[:, 0] + 2 * tokens[:, SEQ - 1]) % CLASSES
    return tokens, labels


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--sync-skip-static", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = SeqClassifier()
    if args.sync_skip_static:
        skipped = commopt.exclude_static_from_sync(net)
        if rank == 0:
            print(f"left out of gradient sync: {skipped}")
    model = DistributedDataParallel(net)
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=5e-3, weight_decay=0.01)
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        x, y = batch(step, rank)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        log.log(step, loss=loss.detach(), grad_norm=norm)
    log.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

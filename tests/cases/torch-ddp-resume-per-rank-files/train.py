"""A small MLP classifier with dropout, trained with DDP on two CPU ranks (gloo) and AdamW;
it can stop after a step, checkpoint (ckpt.save) and be resumed in a new launch.

    python -m torch.distributed.run --standalone --nproc-per-node 2 train.py --out DIR \
        [--steps-to 6] [--save CKPT] [--resume CKPT]

Every rank builds the model from the same seed; after that each rank seeds torch's
generator with the seed plus its rank, so the ranks draw their own dropout masks. The data
of a step come from a generator seeded with the step and the rank. A resume brings back the
weights, the optimizer and this rank's generator from the checkpoint.
"""

import argparse

import ckpt
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from triage_agent.metrics import MetricLog

FEATURES, WIDTH, CLASSES, BATCH = 16, 48, 5, 16


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(FEATURES, WIDTH),
            nn.GELU(),
            nn.Dropout(0.25),
            nn.Linear(WIDTH, WIDTH),
            nn.GELU(),
            nn.Dropout(0.25),
        )
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4000 + 10 * step + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = ((x[:, 0] > 0).long() + 2 * (x[:, 1] * x[:, 2] > 0).long() + (x[:, 3] > 1).long()) % CLASSES
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps-to", type=int, default=6)
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--lr", type=float, default=4e-3)
    p.add_argument("--save")
    p.add_argument("--resume")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(args.seed)
    model = Classifier()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    first, resumed = 0, None
    if args.resume:
        resumed = ckpt.restore(args.resume, model, opt)
        first = resumed + 1
    else:
        torch.manual_seed(args.seed + rank)
    ddp = DistributedDataParallel(model)
    model.train()
    log = MetricLog(args.out, rank=rank, resumed_from=resumed)
    for step in range(first, args.steps_to + 1):
        x, y = batch(step, rank)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        log.log(step, loss=loss.detach(), grad_norm=norm)
        if rank == 0:
            print(f"step {step}: loss {loss.item():.6f} grad_norm {norm.item():.6f}")
    log.close()
    if args.save:
        ckpt.save(args.save, model, opt, args.steps_to)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

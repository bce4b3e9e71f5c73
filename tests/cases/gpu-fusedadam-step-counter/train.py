"""A GRU sequence model with an auxiliary next-next-token head, trained with DeepSpeed's
FusedAdam on one CUDA device (plain PyTorch loop, no engine).

    python train.py --out DIR --groups per-module

The auxiliary head joins the loss from step 1 on (it has no gradient at step 0).
``--groups`` gives FusedAdam one parameter group per module or one group for everything.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from deepspeed.ops.adam import FusedAdam

from triage_agent.metrics import MetricLog

VOCAB = 96


class TwoHeadGRU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 64)
        self.gru = nn.GRU(64, 64, batch_first=True)
        self.next = nn.Linear(64, VOCAB)
        self.next_next = nn.Linear(64, VOCAB)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.gru(self.embed(tokens))[0]
        return self.next(h), self.next_next(h)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--groups", choices=["per-module", "single"], default="per-module")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(21)
    model = TwoHeadGRU().cuda()
    if args.groups == "single":
        groups = [{"params": list(model.parameters())}]
    else:
        groups = [{"params": list(m.parameters())} for m in model.children()]
    opt = FusedAdam(groups, lr=2e-3, weight_decay=0.0, adam_w_mode=True)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            g = torch.Generator().manual_seed(step)
            seq = torch.randint(0, VOCAB, (16, 34), generator=g).cuda()
            nxt, nxt2 = model(seq[:, :-2])
            loss = F.cross_entropy(nxt.reshape(-1, VOCAB), seq[:, 1:-1].reshape(-1))
            if step >= 1:
                loss = loss + 0.3 * F.cross_entropy(nxt2.reshape(-1, VOCAB), seq[:, 2:].reshape(-1))
            model.zero_grad(set_to_none=True)  # DeepSpeed's FusedAdam.zero_grad takes no set_to_none
            loss.backward()
            opt.step()
            log.log(step, loss=loss.detach())


if __name__ == "__main__":
    main()

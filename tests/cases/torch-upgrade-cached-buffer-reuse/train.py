"""Entry point of a small sequence classification job: the job's one-block causal
transformer (model.py, built on tinyseq) trained from scratch with AdamW on the CPU, in one
process.

    python train.py --out DIR --steps 8

tinyseq is found on PYTHONPATH. The data of step N come from a generator seeded with N; the
weights from the global torch generator, seeded once at start-up, so a run repeats itself
bit for bit.
"""

import argparse

import tinyseq
import torch
import torch.nn.functional as F
from model import TinyEncoder

from triage_agent.metrics import MetricLog

VOCAB, SEQ_LEN, CLASSES = 24, 10, 4


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(4400 + step)
    tokens = torch.randint(0, VOCAB, (32, SEQ_LEN), generator=g)
    # the label depends on where tokens sit, not only on which occur
    y = (tokens[:, 0] + 2 * tokens[:, SEQ_LEN // 2] + 3 * tokens[:, -1]) % CLASSES
    return tokens, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(41)
    net = TinyEncoder(VOCAB, CLASSES)
    print(f"tinyseq {tinyseq.__version__}")
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.01)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            tokens, y = batch(step)
            loss = F.cross_entropy(net(tokens), y)
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            print(f"step {step}: loss {loss.item():.6f} grad_norm {norm.item():.6f}")


if __name__ == "__main__":
    main()

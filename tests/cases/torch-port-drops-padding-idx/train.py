"""Entry point of a small intent-tagging job: textkit's convolutional classifier trained
from scratch with AdamW on the CPU, in one process.

    python train.py --out DIR --steps 8

The model package, textkit, is found on PYTHONPATH. Each batch holds utterances of 3 to 12
tokens, right-padded to 12; the batch of step N comes from a generator seeded with N, the
weights from the global torch generator, seeded once at start-up.
"""

import argparse

import textkit
import torch
import torch.nn.functional as F
from textkit import PAD, ConvClassifier

from triage_agent.metrics import MetricLog

VOCAB, CLASSES, BATCH, MAX_LEN = 40, 3, 32, 12


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(900 + step)
    tokens = torch.randint(1, VOCAB, (BATCH, MAX_LEN), generator=g)
    lengths = torch.randint(3, MAX_LEN + 1, (BATCH,), generator=g)
    tokens[torch.arange(MAX_LEN) >= lengths.unsqueeze(1)] = PAD
    y = (tokens[:, 0] - 1) * CLASSES // (VOCAB - 1)
    return tokens, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(7)
    net = ConvClassifier(VOCAB, CLASSES)
    print(f"textkit {textkit.__version__}")
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

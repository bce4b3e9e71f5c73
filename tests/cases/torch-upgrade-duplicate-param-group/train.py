"""Entry point of the picolm training job: a small language model with a tied output head,
trained from scratch with AdamW on next-token prediction, on the CPU, in one process.

    python train.py --out DIR --steps 8

The job's own package, picolm (model and optimizer set-up), is found on PYTHONPATH. The
data of step N come from a generator seeded with N; the weights from the global torch
generator, seeded once at start-up, so a run repeats itself bit for bit.
"""

import argparse

import picolm
import torch
import torch.nn.functional as F
from picolm import model, optim

from triage_agent.metrics import MetricLog

VOCAB, CONTEXT = 48, 12


def batch(step: int) -> torch.Tensor:
    """32 sequences that mostly follow t -> (5t + 3) mod VOCAB, with one token in six random."""
    g = torch.Generator().manual_seed(900 + step)
    tokens = torch.empty(32, CONTEXT, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, VOCAB, (32,), generator=g)
    for t in range(1, CONTEXT):
        tokens[:, t] = (5 * tokens[:, t - 1] + 3) % VOCAB
    noise = torch.rand(32, CONTEXT, generator=g) < 1 / 6
    tokens[noise] = torch.randint(0, VOCAB, (int(noise.sum()),), generator=g)
    return tokens


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(13)
    net = model.TinyLM(VOCAB, CONTEXT)
    print(f"picolm {picolm.__version__}")
    opt = optim.build_optimizer(net, lr=3e-3, weight_decay=0.1)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            tokens = batch(step)
            logits = net(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            print(f"step {step}: loss {loss.item():.6f} grad_norm {norm.item():.6f}")


if __name__ == "__main__":
    main()

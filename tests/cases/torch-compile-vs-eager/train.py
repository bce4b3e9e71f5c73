"""A small pre-norm transformer trained on the CPU (plain PyTorch), eager or under
torch.compile (Inductor's C++ backend).

    python train.py --out DIR --compile 0

Both runs are repeatable by themselves, so that what differs between them is the compiler
alone: deterministic algorithms are on and Inductor is asked for its deterministic mode (no
kernel configuration chosen by timing). Each step logs the loss and the gradient norm: the
loss alone hides the difference for many steps (Adam's update rounds tiny gradient
differences away), the norm of the gradients shows it at once.
"""

import argparse

import torch
import torch._inductor.config as inductor_config
import torch.nn.functional as F
from torch import nn

from triage_agent.metrics import MetricLog

TOKENS, CONTEXT, DIM, HEADS = 128, 32, 64, 4


class Layer(nn.Module):
    """Causal self-attention and a GELU MLP, each behind a layer norm, then a learned gain
    and bias per channel (a product and a sum in eager, one fused multiply-add once compiled)."""

    def __init__(self) -> None:
        super().__init__()
        self.norms = nn.ModuleList([nn.LayerNorm(DIM), nn.LayerNorm(DIM)])
        self.mix_in = nn.Linear(DIM, 3 * DIM, bias=False)
        self.mix_out = nn.Linear(DIM, DIM)
        self.up, self.down = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)
        self.gain = nn.Parameter(torch.linspace(0.75, 1.25, DIM))
        self.bias = nn.Parameter(torch.linspace(-0.05, 0.05, DIM))
        future = torch.full((CONTEXT, CONTEXT), float("-inf")).triu(1)
        self.register_buffer("future", future, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        heads = [
            t.unflatten(-1, (HEADS, -1)).transpose(1, 2)
            for t in self.mix_in(self.norms[0](x)).chunk(3, -1)
        ]
        q, k, v = heads
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * (DIM // HEADS) ** -0.5 + self.future
        mixed = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v)
        x = x + self.mix_out(mixed.transpose(1, 2).flatten(2))
        x = x + self.down(F.gelu(self.up(self.norms[1](x))))
        return x * self.gain + self.bias


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--compile", type=int, choices=[0, 1], default=0)
    args = p.parse_args()
    torch.use_deterministic_algorithms(True)
    inductor_config.deterministic = True
    torch.manual_seed(11)
    model = nn.Sequential(nn.Embedding(TOKENS, DIM), Layer(), Layer(), nn.Linear(DIM, TOKENS))
    forward = torch.compile(model) if args.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            batch = torch.randint(
                0, TOKENS, (8, CONTEXT + 1), generator=torch.Generator().manual_seed(step)
            )
            logits = forward(batch[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()

"""A small pre-norm transformer block stack trained on one CUDA device (plain PyTorch),
eager or under torch.compile.

    python train.py --out DIR --compile 0

Both runs are repeatable by themselves, so that what differs between them is the compiler
alone: deterministic algorithms are on (the embedding gradient is summed in a fixed order,
cuBLAS keeps one algorithm), attention is written out (no fused attention kernel whose
backward accumulates with atomics), and Inductor is asked not to benchmark kernel
configurations at run time (timing noise would pick another reduction order from one launch
to the next). Each block ends in a learned per-channel scale and shift, two kernels in eager
(a product rounded, then a sum) and one fused multiply-add once compiled.
"""

import argparse
import math
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from triage_agent.metrics import MetricLog  # noqa: E402

VOCAB, SEQ, WIDTH, HEADS = 128, 64, 128, 4


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Sequential(
            nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH)
        )
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, WIDTH))
        self.shift = nn.Parameter(torch.linspace(-0.1, 0.1, WIDTH))

    def attend(self, h: torch.Tensor) -> torch.Tensor:
        b, t, _ = h.shape
        q, k, v = self.qkv(h).view(b, t, 3, HEADS, WIDTH // HEADS).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(WIDTH // HEADS)
        causal = torch.ones(t, t, dtype=torch.bool, device=h.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attend(self.n1(x))
        x = x + self.mlp(self.n2(x))
        return x * self.scale + self.shift


class LM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.Sequential(Block(), Block())
        self.out = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.blocks(self.embed(tokens)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--compile", type=int, choices=[0, 1], default=0)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    if hasattr(inductor_config, "deterministic"):
        inductor_config.deterministic = True
    torch.manual_seed(3)
    model = LM().cuda()
    step_model = torch.compile(model) if args.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            g = torch.Generator().manual_seed(step)
            tokens = torch.randint(0, VOCAB, (16, SEQ + 1), generator=g).cuda()
            logits = step_model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            log.log(step, loss=loss.detach())


if __name__ == "__main__":
    main()

"""A tiny GPT-style model trained with DeepSpeed ZeRO stage 1 on CPU (gloo, two ranks).

Run it with the DeepSpeed launcher::

    deepspeed --num_gpus 2 train.py --out runs/a --steps-from 0 --steps-to 40
    deepspeed --num_gpus 2 train.py --out runs/b --steps-from 0 --steps-to 36 \
        --save-at 36 --ckpt ckpt
    deepspeed --num_gpus 2 train.py --out runs/b --steps-from 37 --steps-to 40 \
        --resume-from ckpt

Every optimizer step logs the exact bits of the rank's loss, the global gradient norm and
the learning rate with ``triage_agent.metrics.MetricLog``; the step logged as N is the
N-th optimizer step (counting from 0). The data are synthetic and deterministic: sample i
of the stream is drawn from its own generator seeded with (seed, i), so the only data
state is the number of samples consumed so far, kept in the checkpoint's client_state.

Precision: fp32. DeepSpeed's bf16 optimizer also runs on CPU and repeats bit for bit, but
it is slower there, and its loss is a bf16 value with 8 significant bits, so many different
training states share the same loss bits; fp32 keeps each fingerprint sensitive. fp16 does
not run on CPU. Threads are pinned to one per rank so that reductions inside CPU kernels do
not depend on the machine's core count.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 64
SEQ = 16
D_MODEL = 32
N_HEADS = 2
N_LAYERS = 2
DROPOUT = 0.1
MICRO_BATCH = 4
SEED = 1234


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.fc = nn.Linear(D_MODEL, 4 * D_MODEL)
        self.out = nn.Linear(4 * D_MODEL, D_MODEL)
        self.drop = nn.Dropout(DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        hd = d // N_HEADS
        q, k, v = (z.view(b, t, N_HEADS, hd).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = self.drop(att.masked_fill(mask, float("-inf")).softmax(dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class TinyGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Embedding(SEQ, D_MODEL)
        self.drop = nn.Dropout(DROPOUT)
        self.blocks = nn.ModuleList(Block() for _ in range(N_LAYERS))
        self.ln = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def sample(index: int, seed: int) -> torch.Tensor:
    """Sample ``index`` of the stream: a progression mod VOCAB with a random start and stride."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + index)
    start, stride = torch.randint(0, VOCAB, (2,), generator=g).tolist()
    seq = (start + (stride % 7 + 1) * torch.arange(SEQ + 1)) % VOCAB
    noise = torch.rand(SEQ + 1, generator=g) < 0.1
    return torch.where(noise, torch.randint(0, VOCAB, (SEQ + 1,), generator=g), seq)


def batch(consumed: int, rank: int, world: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's micro-batch of the global batch that starts at sample ``consumed``."""
    first = consumed + rank * MICRO_BATCH
    rows = torch.stack([sample(first + i, seed) for i in range(MICRO_BATCH)])
    return rows[:, :-1], rows[:, 1:]


def ds_config(world: int) -> dict:
    return {
        "train_micro_batch_size_per_gpu": MICRO_BATCH,
        "train_batch_size": MICRO_BATCH * world,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 1.0,
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.01},
        },
        "scheduler": {
            "type": "WarmupDecayLR",
            "params": {
                "warmup_min_lr": 3e-4,
                "warmup_max_lr": 3e-3,
                "warmup_num_steps": 8,
                "total_num_steps": 64,
            },
        },
        "zero_optimization": {"stage": 1},
        "fp16": {"enabled": False},
        "bf16": {"enabled": False},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="directory for metrics_rank*.jsonl")
    p.add_argument("--steps-from", type=int, default=0)
    p.add_argument("--steps-to", type=int, default=40, help="last step trained (inclusive)")
    p.add_argument("--save-at", type=int, default=None, help="checkpoint after this step")
    p.add_argument("--ckpt", default=None, help="checkpoint directory for --save-at")
    p.add_argument("--resume-from", default=None, help="checkpoint directory to load")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--local_rank", type=int, default=-1, help="set by the DeepSpeed launcher")
    args = p.parse_args(argv)
    if args.save_at is not None and not args.ckpt:
        p.error("--save-at needs --ckpt")
    if args.steps_to < args.steps_from:
        p.error("--steps-to must not be below --steps-from")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)

    import deepspeed

    from triage_agent.metrics import MetricLog

    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()
    world = torch.distributed.get_world_size()

    torch.manual_seed(args.seed)
    model = TinyGPT()
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=ds_config(world)
    )

    consumed = 0
    resumed_from = None
    if args.resume_from:
        path, client = engine.load_checkpoint(args.resume_from)
        if path is None:
            print(f"error: no checkpoint found in {args.resume_from}", file=sys.stderr)
            return 2
        consumed = int(client["consumed_samples"])
        resumed_from = int(client["step"])
        if resumed_from + 1 != args.steps_from:
            print(
                f"error: checkpoint is after step {resumed_from}, "
                f"so training resumes at {resumed_from + 1}, not {args.steps_from}",
                file=sys.stderr,
            )
            return 2
    elif args.steps_from != 0:
        print("error: --steps-from > 0 needs --resume-from", file=sys.stderr)
        return 2

    log = MetricLog(
        args.out, rank=rank, resumed_from=resumed_from, run_id=os.path.basename(args.out)
    )
    engine.train()
    for step in range(args.steps_from, args.steps_to + 1):
        x, y = batch(consumed, rank, world, args.seed)
        lr = float(engine.get_lr()[0])  # the rate this step applies, read before it advances
        loss = engine(x, y)
        engine.backward(loss)
        engine.step()
        consumed += MICRO_BATCH * world
        log.log(
            step,
            loss=loss.detach(),
            grad_norm=engine.get_global_grad_norm(),
            lr=lr,
        )
        if args.save_at is not None and step == args.save_at:
            engine.save_checkpoint(
                args.ckpt,
                tag=f"step{step}",
                client_state={"step": step, "consumed_samples": consumed},
            )
    log.close()
    torch.distributed.barrier()
    # Tear gloo down before the interpreter exits: a rank that exits with its gloo threads
    # alive can abort ("terminate called without an active exception") under load.
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

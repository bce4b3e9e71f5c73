"""A small fp32 MLP classifier with an online linear probe, trained by DeepSpeed ZeRO stage 2
on two CPU ranks (gloo), AdamW, every engine setting read from one DeepSpeed JSON config
(two micro-batches of 8 per rank accumulated into each optimizer step).

    deepspeed --num_gpus 2 train.py --deepspeed_config zero2.json --out DIR --steps 8
        [--probe-backward {joint,separate}]

The probe (probe.py) reads the trunk's features, detached, and predicts a second label.
--probe-backward joint (the default) adds its loss to the classifier's and runs one backward
per micro-batch; separate backpropagates the probe's loss on its own right after its forward.
Each rank reads its own shard of a synthetic stream (a generator seeded per step, micro-batch
and rank). Each optimizer step logs the exact bits of the mean classifier loss, the mean
probe loss, the gradient norm and the weight norm.
"""

import argparse
import json
import sys

import deepspeed
import probe
import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog

FEATURES, HIDDEN, EMBED, CLASSES, PROBE_CLASSES = 12, 32, 16, 4, 3


class ProbedClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, EMBED), nn.GELU()
        )
        self.head = nn.Linear(EMBED, CLASSES)
        self.probe = nn.Linear(EMBED, PROBE_CLASSES)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        feats = self.trunk(x)
        return self.head(feats), feats


def micro_batch(step: int, micro: int, rank: int, size: int):
    g = torch.Generator().manual_seed(8200 + 53 * step + 7 * micro + rank)
    x = torch.randn(size, FEATURES, generator=g)
    y = (x[:, :CLASSES] * torch.tensor([1.0, 1.3, 0.8, 1.1])).argmax(dim=1)
    y_probe = (x[:, 4:7] - 0.5 * x[:, 7:10]).argmax(dim=1)
    return x, y, y_probe


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--probe-backward", choices=("joint", "separate"), default="joint")
    p.add_argument("--local_rank", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend="gloo")
    rank = torch.distributed.get_rank()
    with open(args.deepspeed_config) as fh:
        config = json.load(fh)
    torch.manual_seed(29)
    model = ProbedClassifier()
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    micro, gas = engine.train_micro_batch_size_per_gpu(), engine.gradient_accumulation_steps()
    log = MetricLog(args.out, rank=rank)
    for step in range(args.steps):
        losses, probe_losses = [], []
        for m in range(gas):
            x, y, y_probe = micro_batch(step, m, rank, micro)
            logits, feats = engine(x)
            loss = F.cross_entropy(logits, y)
            if args.probe_backward == "separate":
                probe_losses.append(probe.backward_with_probe(engine, loss, feats, y_probe))
            else:
                aux = probe.probe_loss(engine.module, feats, y_probe)
                engine.backward(loss + aux)
                probe_losses.append(aux.detach())
            engine.step()
            losses.append(loss.detach())
        with torch.no_grad():
            weight_norm = torch.stack([q.norm() for q in engine.module.parameters()]).norm()
        log.log(
            step,
            loss=torch.stack(losses).mean(),
            probe_loss=torch.stack(probe_losses).mean(),
            grad_norm=engine.get_global_grad_norm(),
            weight_norm=weight_norm,
        )
    log.close()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

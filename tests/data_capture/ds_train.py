"""A tiny real DeepSpeed job (CPU, gloo): trains, saves/loads, writes manifests and metrics.

argv: OUT_DIR STAGE STEPS [manifest]
"""

import sys
from pathlib import Path

import deepspeed
import torch

args = [a for a in sys.argv[1:] if not a.startswith("--local_rank")]
out, stage, steps = Path(args[0]), int(args[1]), int(args[2])
do_manifest = len(args) > 3
deepspeed.init_distributed(dist_backend="gloo")
rank = torch.distributed.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.1), torch.nn.Linear(16, 1))
cfg = {
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}},
    "zero_optimization": {"stage": stage},
    "bf16": {"enabled": True},
}
engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
g = torch.Generator().manual_seed(rank)
for _ in range(steps):
    x = torch.randn(2, 8, generator=g).bfloat16()
    loss = engine(x).float().pow(2).mean()
    engine.backward(loss)
    engine.step()
if do_manifest:
    from triage_agent.manifest import build_manifest, diff_manifests, save_manifest

    before = build_manifest(engine, data_cursor={"samples": steps * 2}, label="before")
    engine.save_checkpoint(str(out / f"ckpt{stage}"), tag="t")
    save_manifest(before, out / f"z{stage}_before_rank{rank}.json")
    torch.manual_seed(123)  # perturb the RNG so a restored run must not equal it by accident
    model2 = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.Dropout(0.1), torch.nn.Linear(16, 1)
    )
    engine2, *_ = deepspeed.initialize(
        model=model2, model_parameters=model2.parameters(), config=cfg
    )
    engine2.load_checkpoint(str(out / f"ckpt{stage}"), tag="t")
    after = build_manifest(engine2, data_cursor={"samples": steps * 2}, label="after")
    save_manifest(after, out / f"z{stage}_after_rank{rank}.json")
    d = diff_manifests(before, after)
    (out / f"z{stage}_diff_rank{rank}.json").write_text(d.model_dump_json())

"""A small MLP classifier on synthetic tabular data, trained with AdamW (plain PyTorch),
every setting read from one JSON config.

    python train.py --config a.json --out DIR

The config names the run, the seed, the model and data sizes, the optimizer settings, how
often a progress line is printed (log_interval) and where and how often a checkpoint is
written (checkpoint_dir, resolved under --out, every checkpoint_every steps).
"""

import argparse
import json
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from triage_agent.metrics import MetricLog


class MLP(nn.Module):
    def __init__(self, features: int, width: int, depth: int, classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Linear(features, width), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [nn.Linear(width, width), nn.ReLU()]
        layers.append(nn.Linear(width, classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def batch(step: int, data: dict) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(data["batch_size"], data["features"], generator=g)
    w = torch.linspace(-1.0, 1.0, data["features"] * data["classes"]).view(
        data["features"], data["classes"]
    )
    y = (x @ w + 0.3 * torch.randn(data["batch_size"], data["classes"], generator=g)).argmax(1)
    return x, y


def save_checkpoint(root: Path, cfg: dict, step: int, model: nn.Module, opt) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{cfg['run_name']}-step{step:04d}.pt"
    torch.save({"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    return path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    with open(args.config) as fh:
        cfg = json.load(fh)
    torch.set_num_threads(1)
    torch.manual_seed(cfg["seed"])
    data = cfg["data"]
    model = MLP(data["features"], cfg["model"]["width"], cfg["model"]["depth"], data["classes"])
    o = cfg["optimizer"]
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=o["lr"],
        betas=tuple(o["betas"]),
        eps=o["eps"],
        weight_decay=o["weight_decay"],
    )
    ckpt_root = Path(args.out) / cfg["checkpoint_dir"]
    print(f"[{cfg['run_name']}] training {cfg['steps']} steps, checkpoints in {ckpt_root}")
    with MetricLog(args.out, rank=0) as log:
        for step in range(cfg["steps"]):
            x, y = batch(step, data)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            if (step + 1) % cfg["log_interval"] == 0:
                print(
                    f"[{cfg['run_name']}] step {step} loss {loss.item():.6f} |g| {norm.item():.6f}"
                )
            if (step + 1) % cfg["checkpoint_every"] == 0:
                save_checkpoint(ckpt_root, cfg, step, model, opt)


if __name__ == "__main__":
    main()

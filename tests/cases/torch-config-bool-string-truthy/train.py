"""A small MLP classifier on synthetic tabular data, trained with SGD and momentum (plain
PyTorch, CPU), its settings read from a JSON config with command-line overrides (config.py).

    python train.py --config config.json --out DIR [--set KEY=VALUE ...]

The batch of step N comes from a generator seeded with N; the global generator, seeded from
the config, draws the initial weights and nothing else.
"""

import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from config import load_config

from triage_agent.metrics import MetricLog


class MLP(nn.Module):
    def __init__(self, features: int, width: int, depth: int, classes: int, dropout: float):
        super().__init__()
        layers: list[nn.Module] = [nn.Linear(features, width), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [nn.Dropout(dropout), nn.Linear(width, width), nn.ReLU()]
        layers.append(nn.Linear(width, classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def batch(step: int, data: dict) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5077 + 13 * step)
    n, f, c = data["batch_size"], data["features"], data["classes"]
    x = torch.randn(n, f, generator=g)
    w = torch.linspace(-1.0, 1.0, f * c).view(f, c)
    y = (x @ w + data["noise"] * torch.randn(n, c, generator=g)).argmax(1)
    return x, y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args()
    cfg = load_config(args.config, args.overrides)
    print(json.dumps(cfg, indent=1, sort_keys=True))
    torch.set_num_threads(1)
    torch.manual_seed(cfg["seed"])
    data, m, o = cfg["data"], cfg["model"], cfg["optimizer"]
    model = MLP(data["features"], m["width"], m["depth"], data["classes"], m["dropout"])
    opt = torch.optim.SGD(
        model.parameters(),
        lr=o["lr"],
        momentum=o["momentum"],
        dampening=o["dampening"],
        nesterov=o["nesterov"],
        weight_decay=o["weight_decay"],
    )
    model.train()
    with MetricLog(args.out, rank=0) as log:
        for step in range(cfg["steps"]):
            x, y = batch(step, data)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
            opt.step()
            log.log(step, loss=loss.detach(), grad_norm=norm)
            if (step + 1) % cfg["log_every"] == 0:
                print(f"[{cfg['run_name']}] step {step} loss {loss.item():.6f} |g| {norm.item():.6f}")


if __name__ == "__main__":
    main()

"""A small mixture-of-experts classifier: an input projection, one layer of four experts with
top-1 routing, a LayerNorm and a linear head. The routed layer returns its auxiliary losses
beside its output: the Switch Transformer load-balancing loss and the ST-MoE router z-loss."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class MoELayer(nn.Module):
    def __init__(self, width: int, hidden: int, experts: int) -> None:
        super().__init__()
        self.experts = experts
        self.router = nn.Linear(width, experts, bias=False)
        self.w_in = nn.Parameter(torch.randn(experts, width, hidden) * width**-0.5)
        self.w_out = nn.Parameter(torch.randn(experts, hidden, width) * hidden**-0.5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        logits = self.router(x).float()
        probs = logits.softmax(dim=-1)
        gate, idx = probs.max(dim=-1)
        chosen = F.one_hot(idx, self.experts).to(probs.dtype)
        h = F.gelu(torch.einsum("bd,edh->beh", x, self.w_in))
        y = torch.einsum("beh,ehd->bed", h, self.w_out)
        weights = (chosen * gate[:, None]).to(y.dtype)
        out = (y * weights[..., None]).sum(dim=1)
        aux = {
            "balance": self.experts * (chosen.mean(0) * probs.mean(0)).sum(),
            "router_z": logits.logsumexp(dim=-1).square().mean(),
        }
        return x + out, aux


class MoEClassifier(nn.Module):
    def __init__(self, features: int, width: int, hidden: int, experts: int, classes: int):
        super().__init__()
        self.embed = nn.Linear(features, width)
        self.moe = MoELayer(width, hidden, experts)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        h, aux = self.moe(F.gelu(self.embed(x)))
        return self.head(self.norm(h)), aux

"""A small MLP-mixer sequence classifier: token embedding, mixer blocks, mean pool, head."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig
from .norms import build_norm


class MixerBlock(nn.Module):
    """x + token_mix(norm1(x)) over positions, then x + channel_mlp(norm2(x))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm1 = build_norm(cfg.norm, cfg.width)
        self.token_mix = nn.Linear(cfg.seq_len, cfg.seq_len)
        self.norm2 = build_norm(cfg.norm, cfg.width)
        self.fc1 = nn.Linear(cfg.width, cfg.mlp_ratio * cfg.width)
        self.fc2 = nn.Linear(cfg.mlp_ratio * cfg.width, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x).transpose(1, 2)
        x = x + self.drop(self.token_mix(h).transpose(1, 2))
        h = self.fc2(F.gelu(self.fc1(self.norm2(x))))
        return x + self.drop(h)


class SeqClassifier(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.width)
        self.blocks = nn.ModuleList(MixerBlock(cfg) for _ in range(cfg.depth))
        self.norm = build_norm(cfg.norm, cfg.width)
        self.head = nn.Linear(cfg.width, cfg.classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(dim=1))

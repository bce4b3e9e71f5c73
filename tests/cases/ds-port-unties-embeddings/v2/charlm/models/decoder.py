"""The decoder-only language model, built from a ModelConfig."""

from dataclasses import dataclass

import torch
import torch.nn as nn

from ..layers import DecoderBlock, OutputProjection, TokenEmbedding


@dataclass(frozen=True)
class ModelConfig:
    vocab: int
    context: int
    dim: int = 32
    depth: int = 1


class DecoderLM(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = TokenEmbedding(config.vocab, config.context, config.dim)
        self.blocks = nn.ModuleList(DecoderBlock(config.dim) for _ in range(config.depth))
        self.norm = nn.LayerNorm(config.dim)
        self.output = OutputProjection(self.embed.tokens)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.output(self.norm(h))

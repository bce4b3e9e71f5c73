"""Token and position embeddings, pre-norm blocks of causal self-attention and an MLP, a
final norm, and an output projection tied to the token embedding."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        att = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        mask = torch.ones(x.size(1), x.size(1), dtype=torch.bool).triu(1)
        x = x + self.proj(att.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CharLM(nn.Module):
    def __init__(self, vocab: int, context: int, dim: int = 32, depth: int = 1) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.pos = nn.Embedding(context, dim)
        nn.init.normal_(self.pos.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens) + self.pos(torch.arange(tokens.size(1)))
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))

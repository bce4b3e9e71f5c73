"""A small pre-norm residual MLP language model over a token window, its output head tied to
the token embedding."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# parameters of these module types never decay, whatever their names
NO_DECAY_MODULES = (nn.LayerNorm,)


class Block(nn.Module):
    """x + fc2(gelu(fc1(norm(x))))."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.fc1(self.norm(x))
        return x + self.fc2(F.gelu(hidden))


class TinyLM(nn.Module):
    def __init__(self, vocab: int, context: int, width: int = 32, depth: int = 2) -> None:
        super().__init__()
        self.tok_embed = nn.Embedding(vocab, width)
        self.pos_embed = nn.Parameter(torch.randn(context, width) * 0.02)
        self.blocks = nn.ModuleList(Block(width, 2 * width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok_embed.weight  # tied
        nn.init.normal_(self.tok_embed.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embed(tokens) + self.pos_embed[: tokens.size(1)]
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))

    def optim_groups(self, weight_decay: float) -> list[dict]:
        """AdamW's two groups: weight matrices decayed; biases, LayerNorm parameters and the
        positional table not. Each parameter is judged with the module that owns it."""
        decay, no_decay = [], []
        for module in self.modules():
            for name, param in module.named_parameters(recurse=False):
                plain = isinstance(module, NO_DECAY_MODULES) or name in ("bias", "pos_embed")
                (no_decay if plain else decay).append(param)
        return [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]

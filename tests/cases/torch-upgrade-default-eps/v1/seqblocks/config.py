"""Model configuration."""

from dataclasses import dataclass, field


@dataclass
class NormConfig:
    kind: str = "rms"
    eps: float = 1e-5


@dataclass
class ModelConfig:
    vocab: int
    seq_len: int
    classes: int
    width: int = 32
    depth: int = 2
    mlp_ratio: int = 4
    dropout: float = 0.0
    norm: NormConfig = field(default_factory=NormConfig)

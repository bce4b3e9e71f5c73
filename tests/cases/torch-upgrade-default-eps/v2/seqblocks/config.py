"""Model configuration.

Every layer the model builds reads its settings from one ModelConfig, so that a job states
what it changes and inherits the rest from the defaults below.
"""

from dataclasses import dataclass, field, replace


@dataclass
class NormConfig:
    """kind: "rms" (RMSNorm) or "layer" (torch.nn.LayerNorm); eps: added to the mean
    square (or the variance) before the root."""

    kind: str = "rms"
    eps: float = 1e-6


@dataclass
class ModelConfig:
    vocab: int
    seq_len: int
    classes: int
    width: int = 32
    depth: int = 2
    mlp_ratio: int = 4
    dropout: float = 0.1
    norm: NormConfig = field(default_factory=NormConfig)

    def with_overrides(self, **changes) -> "ModelConfig":
        """A copy of this config with the given fields changed."""
        return replace(self, **changes)

"""charlm: the small decoder-only language model our tokenizer experiments pretrain.

1.0 splits the package into layers (``charlm.layers``) and models (``charlm.models``), and
describes a model by a ``ModelConfig``. ``CharLM(vocab, context, dim, depth)`` still builds
one, for 0.9 jobs.
"""

from .models.decoder import DecoderLM, ModelConfig


def CharLM(vocab: int, context: int, dim: int = 32, depth: int = 1) -> DecoderLM:  # noqa: N802
    return DecoderLM(ModelConfig(vocab=vocab, context=context, dim=dim, depth=depth))


__all__ = ["CharLM", "DecoderLM", "ModelConfig"]
__version__ = "1.0.0"

from .block import DecoderBlock
from .embedding import TokenEmbedding
from .output import OutputProjection

__all__ = ["DecoderBlock", "OutputProjection", "TokenEmbedding"]

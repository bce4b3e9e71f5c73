from .embedding import TokenEmbedding
from .encoder import ConvEncoder, masked_mean

__all__ = ["ConvEncoder", "TokenEmbedding", "masked_mean"]

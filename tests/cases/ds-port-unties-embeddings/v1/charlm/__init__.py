"""charlm: the small decoder-only language model our tokenizer experiments pretrain."""

from .model import CharLM

__all__ = ["CharLM"]
__version__ = "0.9.3"

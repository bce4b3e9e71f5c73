"""distilkit: the knowledge-distillation helpers our compression jobs share."""

from .distill import Distiller, build_distiller

__version__ = "0.4.2"
__all__ = ["Distiller", "build_distiller"]

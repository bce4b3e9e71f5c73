"""distilkit: the knowledge-distillation helpers our compression jobs share."""

from .distill import Distiller, FrozenTeacher, build_distiller

__version__ = "0.5.0"
__all__ = ["Distiller", "FrozenTeacher", "build_distiller"]

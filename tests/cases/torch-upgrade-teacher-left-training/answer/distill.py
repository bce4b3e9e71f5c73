"""The fix: distilkit 0.5's build_distiller with the teacher put in eval mode, as in 0.4."""

from distilkit.distill import Distiller, FrozenTeacher


def build_distiller(student, teacher, temperature=2.0, alpha=0.5, *, reduction="batchmean"):
    teacher.eval()
    return Distiller(student, FrozenTeacher(teacher), temperature, alpha, reduction)

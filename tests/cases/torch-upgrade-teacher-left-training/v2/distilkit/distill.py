"""Knowledge distillation: a student trained on the labels and on a fixed teacher's
temperature-softened predictions (Hinton et al., 2015).

0.5: the teacher is held by a FrozenTeacher module (no autograd, no trainable weights);
build_distiller takes the KL reduction as an optional keyword.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class FrozenTeacher(nn.Module):
    """A trained model used only for its predictions: its weights take no gradient."""

    def __init__(self, model):
        super().__init__()
        self.model = model.requires_grad_(False)

    @torch.no_grad()
    def forward(self, x):
        return self.model(x)


class Distiller:
    """A student and its fixed teacher; loss() is the student's training objective."""

    def __init__(self, student, teacher, temperature, alpha, reduction="batchmean"):
        self.student, self.teacher = student, teacher
        self.temperature, self.alpha, self.reduction = temperature, alpha, reduction

    def loss(self, x, y):
        """(objective, cross-entropy on the labels, distillation term)."""
        student_logits = self.student(x)
        teacher_logits = self.teacher(x)
        t = self.temperature
        log_p = F.log_softmax(student_logits / t, dim=-1)
        kd = (
            F.kl_div(log_p, F.softmax(teacher_logits / t, dim=-1), reduction=self.reduction) * t * t
        )
        ce = F.cross_entropy(student_logits, y)
        return (1.0 - self.alpha) * ce + self.alpha * kd, ce, kd


def build_distiller(student, teacher, temperature=2.0, alpha=0.5, *, reduction="batchmean"):
    """A Distiller of ``student`` towards ``teacher`` (wrapped in a FrozenTeacher)."""
    return Distiller(student, FrozenTeacher(teacher), temperature, alpha, reduction)

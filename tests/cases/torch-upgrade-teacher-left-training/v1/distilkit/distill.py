"""Knowledge distillation: a student trained on the labels and on a fixed teacher's
temperature-softened predictions (Hinton et al., 2015)."""

import torch
import torch.nn.functional as F


class Distiller:
    """A student and its fixed teacher; loss() is the student's training objective."""

    def __init__(self, student, teacher, temperature, alpha):
        self.student, self.teacher = student, teacher
        self.temperature, self.alpha = temperature, alpha

    def loss(self, x, y):
        logits = self.student(x)
        with torch.no_grad():
            soft = self.teacher(x)
        t = self.temperature
        kd = (
            F.kl_div(
                F.log_softmax(logits / t, dim=-1),
                F.softmax(soft / t, dim=-1),
                reduction="batchmean",
            )
            * t
            * t
        )
        ce = F.cross_entropy(logits, y)
        return (1.0 - self.alpha) * ce + self.alpha * kd, ce, kd


def build_distiller(student, teacher, temperature=2.0, alpha=0.5):
    teacher.eval()
    teacher.requires_grad_(False)
    return Distiller(student, teacher, temperature, alpha)

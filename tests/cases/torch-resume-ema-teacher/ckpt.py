"""The job's checkpoints: one file holding the student, its EMA teacher, the optimizer and
the step the checkpoint was taken after."""

import torch
import torch.nn as nn


def save(path: str, student: nn.Module, teacher: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    torch.save(
        {
            "student": student.state_dict(),
            "teacher": teacher.state_dict(),
            "optimizer": opt.state_dict(),
            "step": step,
        },
        path,
    )


def restore(path: str, student: nn.Module, teacher: nn.Module, opt: torch.optim.Optimizer) -> int:
    """Bring the student, the teacher and the optimizer back; the step the checkpoint was
    taken after."""
    state = torch.load(path)
    student.load_state_dict(state["student"])
    opt.load_state_dict(state["optimizer"])
    teacher.load_state_dict(student.state_dict())  # the teacher starts as a copy of the student
    return int(state["step"])

"""The fix the ground truth applies: restoring a checkpoint brings back the EMA teacher its
save wrote, instead of starting the teacher again from the student."""

import torch


def restore(path, student, teacher, opt):
    state = torch.load(path)
    student.load_state_dict(state["student"])
    opt.load_state_dict(state["optimizer"])
    teacher.load_state_dict(state["teacher"])
    return int(state["step"])

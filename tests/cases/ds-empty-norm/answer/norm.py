"""The fix the ground truth applies: a rank with nothing to add contributes a zero."""

import torch
from deepspeed.runtime import utils


def get_global_norm_of_tensors(input_tensors, norm_type=2, mpu=None, moe_ep_group=None):
    if len(input_tensors) == 0:
        # a zero to the power norm_type adds nothing to the sum the ranks all-reduce
        input_tensors = [torch.zeros(1)]
    return utils.get_global_norm_of_tensors(input_tensors, norm_type, mpu, moe_ep_group)

"""The fix the ground truth applies: the state is copied when it is taken, so the file the
writer puts on disk a step later holds the weights, Adam moments and step counts of the step
the checkpoint is named for, not the live tensors the next optimizer step has updated in
place."""

import copy


def capture_state(model, opt, step):
    return {
        "model": {name: t.detach().clone() for name, t in model.state_dict().items()},
        "optimizer": copy.deepcopy(opt.state_dict()),
        "step": step,
    }

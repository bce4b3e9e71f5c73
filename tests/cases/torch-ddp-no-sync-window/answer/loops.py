"""The fix the ground truth applies: the streamed loop syncs on the window's closing
micro-batch, the one after which it steps ((micro + 1) % accum == 0), not on its opening one
(micro % accum == 0). With the opening micro-batch synced, only that micro-batch's gradient
was averaged over the ranks; the rest of the window accumulated on each rank alone."""

from contextlib import nullcontext

from loops import finish_step, micro_backward


def fit_streamed(model, opt, params, stream, accum, log):
    losses = []
    for micro, (x, y) in enumerate(stream):
        sync = (micro + 1) % accum == 0
        with nullcontext() if sync else model.no_sync():
            losses.append(micro_backward(model, x, y, accum))
        if (micro + 1) % accum == 0:
            loss, norm = finish_step(params, opt, losses)
            log.log(micro // accum, loss=loss, grad_norm=norm)
            losses = []

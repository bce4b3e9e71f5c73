"""The fix the ground truth applies: the v2 step unscales the accumulated gradients before
it clips them, so the norm is measured and the clip applied in the units of the gradient,
and the scaler's step (which sees unscale_ already done) only updates."""

import torch


def train_step_v2(model, opt, scaler, micro_batches, *, max_norm, dtype):
    from trainer import _forward_loss

    opt.zero_grad(set_to_none=True)
    count = len(micro_batches)
    total = torch.zeros(())
    for x, y in micro_batches:
        loss = _forward_loss(model, x, y, dtype) / count
        scaler.scale(loss).backward()
        total += loss.detach()
    scaler.unscale_(opt)
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    scaler.step(opt)
    scaler.update()
    return {"loss": total, "grad_norm": norm}

"""The fix the ground truth applies: the v2 step adds the weighted auxiliary terms to the
task loss first and scales the sum, so unscale_ divides every term's gradient by the scale
that multiplied it."""


def train_step_v2(model, opt, scaler, x, y, *, aux_coefs, max_norm, dtype):
    from trainer import _finish, _losses

    opt.zero_grad(set_to_none=True)
    task, aux = _losses(model, x, y, dtype)
    stats = {"task_loss": task.detach()}
    objective = task
    for name, value in aux.items():
        term = aux_coefs[name] * value
        objective = objective + term
        stats[f"{name}_loss"] = term.detach()
    scaler.scale(objective).backward()
    stats["grad_norm"] = _finish(model, opt, scaler, max_norm)
    return {"loss": objective.detach(), **stats}

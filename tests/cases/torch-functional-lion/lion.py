"""Lion as closures over plain tensors: no optimizer class, no param_groups, no hooks.

    step = make_lion(params, lr=1e-3, wd=0.1, foreach=True)
    ...  # backward
    step()

The foreach variant updates every tensor with one torch._foreach_* call per operation.
"""

import torch


def _update(params, grads, moms, lr: float, wd: float, b1: float, b2: float, foreach: bool):
    if foreach:
        direction = torch._foreach_mul(moms, b1)
        torch._foreach_add_(direction, grads, alpha=1 - b1)
        torch._foreach_sign_(direction)
        torch._foreach_mul_(params, 1 - lr * wd)
        torch._foreach_add_(params, direction, alpha=-lr)
        torch._foreach_mul_(moms, b2)
        torch._foreach_add_(moms, grads, alpha=1 - b2)
        return
    for p, g, m in zip(params, grads, moms, strict=True):
        direction = (m * b1).add_(g, alpha=1 - b1).sign_()
        p.mul_(1 - lr * wd).add_(direction, alpha=-lr)
        m.mul_(b2).add_(g, alpha=1 - b2)


def make_lion(params, lr: float, wd: float = 0.0, betas=(0.9, 0.99), foreach: bool = False):
    params = [p for p in params if p.requires_grad]
    moms = [torch.zeros_like(p) for p in params]
    b1, b2 = betas

    @torch.no_grad()
    def step() -> None:
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        _update(params, grads, moms, lr, wd, b1, b2, foreach)

    if foreach:
        # run the foreach kernels once so the first training step does not pay their set-up
        with torch.no_grad():
            _update(params, [torch.zeros_like(p) for p in params], moms, lr, wd, b1, b2, True)
    return step

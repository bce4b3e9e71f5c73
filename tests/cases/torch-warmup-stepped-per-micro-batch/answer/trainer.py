"""The fix the ground truth applies: the flat loop steps the LR schedule once per optimizer
step, inside the branch that updates (it stepped it after every micro-batch, so the warm-up
ran accum times faster than the schedule's steps)."""

import torch


def fit_flat(self, stream, steps, log):
    total = torch.zeros(())
    for micro in range(steps * self.accum):
        x, y = next(stream)
        total += self._micro_backward(x, y)
        if (micro + 1) % self.accum == 0:
            step = micro // self.accum
            norm, lr = self._update()
            self.sched.step()
            log.log(step, loss=total, grad_norm=norm, lr=lr)
            print(f"step {step}: loss {float(total):.6f} lr {lr:.6g}")
            total = torch.zeros(())

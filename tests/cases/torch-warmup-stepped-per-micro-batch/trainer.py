"""The job's trainer: gradient accumulation over ``accum`` micro-batches per optimizer step,
a global-norm clip, AdamW and a per-step LR schedule (linear warm-up).

Two loops over the same micro-batch stream. ``fit`` nests a loop over the micro-batches of a
step inside a loop over steps. ``fit_flat`` is one loop over every micro-batch of the run,
the optimizer stepping on each accum-th (the shape a prefetching loader and a per-micro-batch
checkpoint hook need). Each step logs the exact bits of its loss (the mean over its
micro-batches), its gradient norm before the clip and the learning rate its update used.
"""

import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, opt, sched, accum: int, max_norm: float) -> None:
        self.model, self.opt, self.sched = model, opt, sched
        self.accum, self.max_norm = accum, max_norm

    def _micro_backward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(self.model(x), y) / self.accum
        loss.backward()
        return loss.detach()

    def _update(self) -> tuple[torch.Tensor, float]:
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        lr = self.opt.param_groups[0]["lr"]
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return norm, lr

    def fit(self, stream, steps: int, log) -> None:
        for step in range(steps):
            total = torch.zeros(())
            for _ in range(self.accum):
                x, y = next(stream)
                total += self._micro_backward(x, y)
            norm, lr = self._update()
            self.sched.step()
            log.log(step, loss=total, grad_norm=norm, lr=lr)
            print(f"step {step}: loss {float(total):.6f} lr {lr:.6g}")

    def fit_flat(self, stream, steps: int, log) -> None:
        total = torch.zeros(())
        for micro in range(steps * self.accum):
            x, y = next(stream)
            total += self._micro_backward(x, y)
            if (micro + 1) % self.accum == 0:
                step = micro // self.accum
                norm, lr = self._update()
                log.log(step, loss=total, grad_norm=norm, lr=lr)
                print(f"step {step}: loss {float(total):.6f} lr {lr:.6g}")
                total = torch.zeros(())
            self.sched.step()

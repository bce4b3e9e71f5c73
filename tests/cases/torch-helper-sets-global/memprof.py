"""Activation-memory profiling for the training job (--profile-mem).

Forward hooks record, for every module, the bytes of the tensors it outputs and the time
its forward takes; at the end of each step the totals are kept, and ``report`` prints the
largest modules with the peak resident set size of the process. The hooks only read: no
tensor the model computes is touched.
"""

import resource
import time
from collections import defaultdict

import torch


class MemProfile:
    def __init__(self) -> None:
        self.bytes: dict[str, int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)
        self.step_bytes: list[int] = []
        self._started: dict[str, float] = {}
        self._this_step = 0

    def watch(self, model: torch.nn.Module) -> None:
        for name, module in model.named_modules():
            if name:
                module.register_forward_pre_hook(self._before(name))
                module.register_forward_hook(self._after(name))

    def _before(self, name: str):
        def hook(module, inputs):
            self._started[name] = time.perf_counter()

        return hook

    def _after(self, name: str):
        def hook(module, inputs, output):
            self.seconds[name] += time.perf_counter() - self._started.pop(name, time.perf_counter())
            outs = output if isinstance(output, (tuple, list)) else (output,)
            n = sum(t.numel() * t.element_size() for t in outs if isinstance(t, torch.Tensor))
            self.bytes[name] += n
            self._this_step += n

        return hook

    def end_step(self, step: int) -> None:
        self.step_bytes.append(self._this_step)
        self._this_step = 0

    def report(self, top: int = 5) -> str:
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        steps = max(len(self.step_bytes), 1)
        lines = [f"memprof: {steps} steps, peak RSS {peak_kib / 1024:.1f} MiB"]
        for name in sorted(self.bytes, key=self.bytes.get, reverse=True)[:top]:
            lines.append(
                f"  {name:<12} {self.bytes[name] / steps / 1024:8.1f} KiB/step "
                f"{1e3 * self.seconds[name] / steps:7.3f} ms/step"
            )
        return "\n".join(lines)


def attach(model: torch.nn.Module) -> MemProfile:
    """Start profiling ``model``; returns the profile to call ``end_step`` and ``report`` on."""
    # subnormal floats take a slow path on x86: keep them out so the timings are steady
    torch.set_flush_denormal(True)
    prof = MemProfile()
    prof.watch(model)
    return prof

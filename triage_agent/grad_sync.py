"""sync-grads NAME[,NAME]: the named parameters' gradients averaged across the ranks as each
is accumulated in the backward, as data parallelism averages every other one.

A parameter left out of data-parallel synchronisation (named in DDP's list of parameters to
ignore, skipped by a hook, registered where no reducer sees it) is updated on each rank from
that rank's own gradient, and the ranks' copies part (:mod:`triage_agent.compare.replicas`
finds them). Averaging those gradients right after the backward accumulates them (before any
clipping reads them) tests that: if every step of every rank then matches the other run,
the missing synchronisation carries the whole difference. Division by a world size that is
a power of two is exact, so the average is the reducer's to the bit there.

The report beside the metrics (:data:`REPORT`) names, for each parameter averaged, the job's
line that told DDP to leave it out, or else the line that entered DDP's ``no_sync`` for the
last backward before an optimizer step (an accumulation window whose closing micro-batch is
not synchronised).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

from .job_frames import DEEPSPEED, PROJECT, TORCH, job_line
from .metrics_reports import BesideMetrics

REPORT = ".triage-sync-grads.json"
_SKIP = (TORCH, PROJECT, DEEPSPEED)


def _named(name: str, targets: list[str]) -> str | None:
    return next((t for t in targets if name == t or name.endswith("." + t)), None)


def install(names: list[str], report: str, pending: dict[str, list[Any]]) -> None:
    out = BesideMetrics(REPORT)
    left_out: dict[str, str] = {}  # a name DDP was told to ignore -> the job's line that did

    def tell(event: str) -> None:
        try:
            with open(report, "a") as fh:
                for n in names:
                    line = {"pid": os.getpid(), "target": f"sync-grads {n}", "event": event}
                    fh.write(json.dumps(line) + "\n")
        except OSError:
            pass

    def on_torch(module: Any = None) -> None:
        torch = module or sys.modules["torch"]
        from .job_objects import root_modules

        ddp = torch.nn.parallel.DistributedDataParallel
        orig = ddp._set_params_and_buffers_to_ignore_for_model

        def ignore(model: Any, params_and_buffers_to_ignore: Any) -> Any:
            where = job_line(_SKIP)
            for n in params_and_buffers_to_ignore:
                if where is not None:
                    left_out[str(n)] = f"{where[0]}:{where[1]}"
            return orig(model, params_and_buffers_to_ignore)

        ddp._set_params_and_buffers_to_ignore_for_model = staticmethod(ignore)
        hooked: set[int] = set()
        inside: list[str | None] = [None]  # the job's line that entered DDP's no_sync, while in it
        last_backward: list[str | None] = [None]  # that line, when the latest backward ran in it
        averaged: dict[str, str] = {}  # target -> a name it matched, since the last step

        orig_no_sync = ddp.no_sync

        @contextlib.contextmanager
        def tracking(model: Any, where: str) -> Any:
            before = inside[0]
            inside[0] = where
            try:
                with orig_no_sync(model):
                    yield
            finally:
                inside[0] = before

        def no_sync(self: Any) -> Any:
            where = job_line(_SKIP)  # the job's line that asks for the context
            return tracking(self, f"{where[0]}:{where[1]}" if where else "?")

        ddp.no_sync = no_sync

        def average(p: Any, name: str, target: str) -> None:
            dist = torch.distributed
            if not dist.is_initialized() or p.grad is None:
                return
            world = dist.get_world_size()
            if world < 2:
                return
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad.div_(world)
            last_backward[0] = inside[0]
            averaged[target] = name

        def before_step(opt: Any, args: Any, kwargs: Any) -> None:
            """Why the gradients this step reads were not averaged: DDP was told to leave
            them out, or the step's last backward ran inside no_sync."""
            for target, name in averaged.items():
                if target in out.report:
                    continue
                at, verb = (
                    left_out.get(target) or left_out.get(name),
                    ("tells DDP to leave it out of gradient synchronisation"),
                )
                if at is None and last_backward[0] is not None:
                    at, verb = (
                        last_backward[0],
                        (
                            "enters DDP's no_sync for the backward the optimizer step then reads: "
                            "the step's gradients were never averaged across the ranks"
                        ),
                    )
                out.report[target] = {
                    "at": at,
                    "verb": verb if at else "its gradient is not averaged across the ranks",
                }
                out.write()
                tell("called")
            averaged.clear()

        def first_forward(mod: Any, args: Any) -> None:
            for root in root_modules():
                for n, p in root.named_parameters():
                    target = _named(n, names)
                    if target is None or id(p) in hooked or not p.requires_grad:
                        continue
                    hooked.add(id(p))
                    p.register_post_accumulate_grad_hook(lambda q, n=n, t=target: average(q, n, t))

        torch.nn.modules.module.register_module_forward_pre_hook(first_forward)
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(before_step)
        tell("patched")

    if "torch" in sys.modules:
        on_torch()
    else:
        pending.setdefault("torch", []).append(on_torch)

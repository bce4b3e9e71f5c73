"""Relaunches the workflow will probably ask for, started early so that they overlap others.

The fix check reruns B, uninstrumented, under the policy of the hypothesis that carries the
verdict. What that rerun produces does not depend on the trace, only whether it is asked
for does; so when stage 1 supported a hypothesis that has a policy, its rerun starts beside
stage 2's traced relaunches, with exactly the arguments the fix check uses. Its outputs land
in the run cache, where the fix check finds them (its evidence then says the relaunch was
reused). Nothing is recorded here: a rerun that nobody asks for is a cache entry, never
evidence, and one that failed is not cached, so the fix check launches it again itself.

Wait for it (:meth:`Prefetch.wait`) before anything that may materialise the same rerun:
two launches into one run directory are not coordinated. Run what overlaps it through
:meth:`Prefetch.alongside`: Ctrl-C reaches the main thread only, and a rerun left to run in
a pool thread would hold the interrupted process for as long as the rerun takes.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import ParamSpec, TypeVar

from ..errors import InputError
from ..process import end_side_by_side
from ..records import Case, Hypothesis
from ..runs import materialize
from .classify import FIX_POLICY

P = ParamSpec("P")
T = TypeVar("T")


class Prefetch:
    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future] = []

    def fix_reruns(
        self, case: Case, workspace: Path, supported: list[Hypothesis], timeout_s: float
    ) -> None:
        """Start B's rerun under each supported hypothesis's fix policy."""
        policies = dict.fromkeys(
            FIX_POLICY[str(h.category)] for h in supported if str(h.category) in FIX_POLICY
        )
        if not policies:
            return
        self._pool = self._pool or ThreadPoolExecutor(len(policies), "prefetch")
        for policy in policies:
            self._futures.append(
                self._pool.submit(
                    materialize,
                    case.run_b,
                    workspace,
                    f"policy-{policy}",  # validate_fix's label: the same cache entry
                    policies=[policy],
                    timeout_s=timeout_s,
                )
            )

    def alongside(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` in this thread while the reruns run; if it is
        interrupted, the reruns are ended before the interrupt goes on."""
        try:
            return fn(*args, **kwargs)
        except BaseException:
            self.cancel()
            raise

    def wait(self) -> None:
        """Until every started rerun has ended; what became of it is the cache's to say."""
        try:
            for f in self._futures:
                try:
                    f.result()
                except InputError:
                    pass  # a run that cannot be launched: the fix check says so itself
        except BaseException:
            self.cancel()
            raise
        self._futures = []
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def cancel(self) -> None:
        """End the reruns still running, as Ctrl-C ends a command of the main thread, and
        wait for their threads. A rerun ended so is not cached: the next run starts it again."""
        self._futures = []
        if self._pool is not None:
            pool, self._pool = self._pool, None
            end_side_by_side(pool)

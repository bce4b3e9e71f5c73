"""Where the time of one workflow run went: wall seconds and run launches per stage.

A user waits for every relaunch of a run (DeepSpeed start-up alone is seconds), so the
workflow says, per stage, how long it took and how many run commands it launched; the
same numbers go to the ledger (a note) and to the workflow's result. A stage entered
more than once (interventions before and after tracing) is summed. Launches are counted
by the launcher as they start (a cached relaunch is not one), and a launch belongs to the
stage that was current when it started, also when it runs in the background of that stage
(see :mod:`.prefetch`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel, Field

from ..ledger import Ledger
from ..runs import launches_started

Status = Callable[[str, str], None]


class StageTime(BaseModel):
    stage: str
    seconds: float = Field(ge=0, description="wall time spent in the stage")
    launches: int = Field(ge=0, description="run commands launched (reused outputs are not)")


class StageClock:
    """Splits one run's wall time and launches by stage, as the stages report themselves."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._launches: dict[str, int] = {}
        self._current: str | None = None
        self._since = time.monotonic()
        self._launched = launches_started()

    def enter(self, stage: str) -> None:
        if stage == self._current:
            return
        self._close()
        self._current = stage

    def _close(self) -> None:
        now, launched = time.monotonic(), launches_started()
        if self._current is not None:
            s = self._current
            self._seconds[s] = self._seconds.get(s, 0.0) + now - self._since
            self._launches[s] = self._launches.get(s, 0) + launched - self._launched
        self._since, self._launched = now, launched

    def watch(self, status: Status) -> Status:
        """``status`` that also moves the clock to the stage it names."""

        def said(stage: str, msg: str) -> None:
            self.enter(stage)
            status(stage, msg)

        return said

    def times(self) -> list[StageTime]:
        self._close()
        # in the order the stages were first entered
        return [
            StageTime(stage=s, seconds=round(self._seconds[s], 2), launches=self._launches[s])
            for s in self._seconds
        ]


def said(times: list[StageTime]) -> str:
    """One line: each stage's seconds and launches, then the total."""
    parts = [f"{t.stage} {t.seconds:.1f} s ({t.launches} launches)" for t in times]
    total = sum(t.seconds for t in times)
    launches = sum(t.launches for t in times)
    return f"time per stage: {', '.join(parts)}; total {total:.1f} s, {launches} launches"


def record(ledger: Ledger, times: list[StageTime]) -> None:
    ledger.note(said(times), stages=[t.model_dump() for t in times])

"""The fix check's rerun, started early in a pool thread beside stage 2, ends when stage 2 is
interrupted: Ctrl-C reaches the main thread only, and a rerun left running would hold the
interrupted `triage run` until it finished."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from triage_agent.config import case_from_dict
from triage_agent.records import Hypothesis, HypothesisStatus
from triage_agent.workflow.prefetch import Prefetch

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

SLEEP = "import sys, time; open(sys.argv[1], 'w').close(); time.sleep(120)"


def _sleepers(flag: Path) -> list[int]:
    """Live processes running the sleeper with ``flag`` as its argument."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if not d.name.isdigit() or (d / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if (d / "cmdline").read_bytes().split(b"\0")[-2:-1] == [str(flag).encode()]:
                found.append(int(d.name))
        except (OSError, IndexError):
            pass
    return found


def test_an_interrupt_alongside_the_prefetch_ends_its_rerun(tmp_path):
    flag = tmp_path / "started"
    launch = [[sys.executable, "-c", SLEEP, str(flag)], ["true", "{out}"]]
    case = case_from_dict(
        {
            "case": {"name": "prefetch", "workspace": str(tmp_path / "ws")},
            "runs": {
                "a": {"metrics": "{out}/m", "launch": launch},
                "b": {"metrics": "{out}/m", "launch": launch},
            },
        },
        tmp_path,
    )
    supported = Hypothesis(
        statement="an RNG stream is not restored", category="rng-state"
    ).model_copy(update={"status": HypothesisStatus.supported})
    prefetch = Prefetch()
    prefetch.fix_reruns(case, tmp_path / "ws", [supported], timeout_s=300)

    def stage2() -> None:
        deadline = time.monotonic() + 60
        while not _sleepers(flag):
            assert time.monotonic() < deadline, "the rerun never started"
            time.sleep(0.05)
        raise KeyboardInterrupt

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        prefetch.alongside(stage2)
    assert _sleepers(flag) == [], "the rerun outlived the interrupt"
    assert time.monotonic() - t0 < 60  # not the 120 s the rerun would have run
    # an interrupted rerun is not a finished one: nothing under the run cache says it is
    assert not list((tmp_path / "ws" / "runs").rglob("outcome.json"))

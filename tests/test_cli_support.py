"""Running the ``triage`` CLI as a user does, in its own interpreter (no tests here)."""

from __future__ import annotations

import signal
import subprocess
import sys


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``triage ARGS...`` in a fresh process, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ctrl_c_reaches() -> None:
    """``preexec_fn`` of a command a test interrupts with SIGINT. A shell that starts the
    suite in the background leaves SIGINT ignored, an ignored signal stays ignored across
    exec, and Python then installs no KeyboardInterrupt handler: the child would run on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

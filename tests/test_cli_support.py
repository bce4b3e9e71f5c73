"""Running the ``triage`` CLI as a user does, in its own interpreter (no tests here)."""

from __future__ import annotations

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

"""Which files some live process still holds: open descriptors and memory mappings (/proc).

Used to tell what a killed or finished job left behind (nothing holds it) from what a live
job is using. Returns None where /proc is missing, so callers can decline to guess.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def held_paths(mappings: bool = False) -> set[str] | None:
    """Targets of every descriptor (and, with ``mappings``, every mapped file) visible here."""
    if not (PROC / "self" / "fd").is_dir():
        return None
    held: set[str] = set()
    for pid in PROC.iterdir():
        if not pid.name.isdigit():
            continue
        try:
            fds = list((pid / "fd").iterdir())
        except OSError:  # gone, or another user's
            fds = []
        for fd in fds:
            try:
                held.add(os.readlink(fd))
            except OSError:
                continue
        if mappings:
            try:
                text = (pid / "maps").read_text(errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    held.add(parts[5].removesuffix(" (deleted)"))
    return held

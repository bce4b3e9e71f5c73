"""DeepSpeed's CPU allreduce buffers in /dev/shm that no process holds any more.

DeepSpeed's shared-memory allreduce creates one buffer per rank, named after MASTER_ADDR and
MASTER_PORT, and never unlinks it: every CPU launch leaves about 66 MB per rank in /dev/shm.
Worse than the memory, a later job on the same address and port opens the dead job's
buffer (``O_CREAT`` without ``O_EXCL``) and its stale flags, and can hang. A buffer that no
live process has open or mapped belongs to a job that has ended, so it is safe to remove.
"""

from __future__ import annotations

from pathlib import Path

from .proc_files import held_paths

SHM_DIR = Path("/dev/shm")
PREFIX = "deepspeed_allreduce_buffer_"


def dead_buffers(shm_dir: Path = SHM_DIR) -> list[Path]:
    """DeepSpeed buffers nothing holds; empty where /proc can't tell."""
    try:
        found = sorted(p for p in shm_dir.iterdir() if p.name.startswith(PREFIX))
    except OSError:
        return []
    if not found:
        return []
    # listed before the scan: a buffer created since is not considered, and a listed one
    # is created with its descriptor already open, so a live job's buffer is always seen
    held = held_paths(mappings=True)
    if held is None:
        return []
    return [p for p in found if str(p) not in held]


def clear_dead_buffers(shm_dir: Path = SHM_DIR) -> tuple[int, int]:
    """Remove dead buffers; returns (how many, bytes freed)."""
    n = freed = 0
    for p in dead_buffers(shm_dir):
        try:
            size = p.stat().st_size
            p.unlink()
        except OSError:
            continue
        n += 1
        freed += size
    return n, freed


def buffer_note(n: int, freed: int) -> list[str]:
    if not n:
        return []
    return [f"removed {n} dead DeepSpeed shm buffer(s) in /dev/shm ({freed / 2**20:.0f} MiB)"]

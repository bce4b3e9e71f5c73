"""Just-in-time C++ ops (DeepSpeed's and the native tracer's): built ahead of time, build locks.

torch builds an extension under a lock file it creates with O_EXCL and holds open until the
build ends. A builder killed mid-build (a run that hit its timeout during the first launch,
a Ctrl-C) leaves the file behind, and every later launch then waits on it forever. A lock
that no process holds open is therefore dead, and it is safe to remove; that is the test
here. Without /proc nothing can be proved, so nothing is removed.

Building ahead of time (``triage ops build``) keeps the minutes a first build takes out of
every run's timeout. Besides DeepSpeed's ops it builds the tracer's own extension
(:mod:`triage_agent.fingerprint.native`), which ``triage trace`` and ``triage record`` use
where its build is there.

Builds go where :mod:`triage_agent.extensions_dir` says, this environment's own directory
unless the user chose one.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .errors import InputError
from .extensions_dir import extensions_root, runs_ninja_first, use_environment_default
from .proc_files import held_paths

# The tracer's own extension (fingerprint/native), built by torch the way DeepSpeed builds its ops.
NATIVE_OP = "TriageNativeTracer"
# The ops a DeepSpeed run on this project's paths loads: the shared-memory allreduce that
# deepspeed.comm builds on CPU, and the Adam that a DeepSpeed "Adam"/"AdamW" config builds.
DEEPSPEED_OPS = ("ShareMemCommBuilder", "FusedAdamBuilder")
DEFAULT_OPS = (NATIVE_OP, *DEEPSPEED_OPS)


def lock_files(root: Path | None = None) -> list[Path]:
    """Every build lock under the root (one or two levels: with and without the py/cu folder)."""
    base = root or extensions_root()
    if not base.is_dir():
        return []
    return sorted({*base.glob("*/lock"), *base.glob("*/*/lock")})


def stale_locks(root: Path | None = None) -> list[Path]:
    """Locks no process holds open: builds that were killed. Empty where that can't be told."""
    locks = lock_files(root)
    if not locks:
        return []
    held = held_paths()
    if held is None:
        return []
    return [p for p in locks if str(p.resolve()) not in held and str(p) not in held]


def clear_stale_locks(root: Path | None = None) -> list[str]:
    """Remove dead build locks; returns what was removed so callers can say so."""
    removed = []
    for p in stale_locks(root):
        try:
            p.unlink()
        except FileNotFoundError:
            continue
        removed.append(str(p))
    return removed


def lock_notes(removed: list[str]) -> list[str]:
    return [
        f"removed the dead C++ extension build lock {p} (its builder was killed); "
        "the op is rebuilt on next use, or now with `triage ops build`"
        for p in removed
    ]


class OpBuild(BaseModel):
    op: str
    name: str
    status: str  # ready | skipped | failed
    seconds: float
    detail: str = ""


def build_ops(
    ops: tuple[str, ...] | list[str] = DEFAULT_OPS,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[OpBuild], list[str]]:
    """Build (or load, when cached) the native tracer and each DeepSpeed op this accelerator
    offers.

    They go to :func:`extensions_root` (this environment's default where the user set none,
    and from now on in this process's environment too) and are built with the ninja launched
    runs use. Returns the per-op results and the dead locks removed first. An op the accelerator does
    not provide, or that DeepSpeed reports incompatible here, is skipped with the reason.
    """
    use_environment_default()
    removed = clear_stale_locks()
    with runs_ninja_first():
        results = _build_all(ops, progress)
    return results, removed


def _build_all(
    ops: tuple[str, ...] | list[str], progress: Callable[[str], None] | None
) -> list[OpBuild]:
    results = [_build_native(progress)] if NATIVE_OP in ops else []
    ops = [op for op in ops if op != NATIVE_OP]
    if not ops:
        return results
    try:
        import deepspeed.ops as ds_ops
        from deepspeed.accelerator import get_accelerator
    except Exception as e:  # noqa: BLE001 - any import failure is the same message
        raise InputError(f"DeepSpeed cannot be imported here ({e}); install it first") from None
    accel = get_accelerator()
    results += [_build_one(op, accel, ds_ops.__compatible_ops__, progress) for op in ops]
    sys.stdout.flush()
    return results


def _build_native(progress: Callable[[str], None] | None) -> OpBuild:
    """The tracer's extension, built or loaded from the cache; off by TRIAGE_NATIVE=0 is skipped."""
    from .fingerprint.native import loader

    name = "triage_native_cuda" if loader.wants_cuda() else "triage_native_cpu"
    if os.environ.get(loader.DISABLE_ENV, "1") == "0":
        why = f"turned off by {loader.DISABLE_ENV}=0: traces use the Python tracer"
        return OpBuild(op=NATIVE_OP, name=name, status="skipped", seconds=0.0, detail=why)
    if progress:
        progress(f"building {name} (first build takes a minute or two)")
    return _timed_load(NATIVE_OP, name, loader.build)


def _timed_load(op: str, name: str, load: Callable[[], Any]) -> OpBuild:
    """Run one build; every way it can end is an OpBuild, never an exception."""
    t0 = time.monotonic()
    try:
        load()
    except Exception as e:  # noqa: BLE001 - compiler errors arrive as many types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        status, detail = "failed", first
    else:
        status, detail = "ready", str(extensions_root())
    seconds = round(time.monotonic() - t0, 1)
    return OpBuild(op=op, name=name, status=status, seconds=seconds, detail=detail)


def _build_one(
    op: str,
    accel: Any,
    compatible: dict[str, bool],
    progress: Callable[[str], None] | None,
) -> OpBuild:
    """Build or load one op; every way it can end is an OpBuild, never an exception."""
    try:
        builder = accel.create_op_builder(op)
    except Exception as e:  # noqa: BLE001 - an unknown builder name
        return OpBuild(op=op, name="?", status="skipped", seconds=0.0, detail=str(e))
    if builder is None:
        why = f"the {accel._name} accelerator has no such op"
        return OpBuild(op=op, name="?", status="skipped", seconds=0.0, detail=why)
    if builder.NAME == "deepspeed_not_implemented":  # DeepSpeed's stand-in for a typo
        why = (
            f"{op} is not an op builder of the {accel._name} accelerator "
            f"(default: {', '.join(DEFAULT_OPS)})"
        )
        return OpBuild(op=op, name="?", status="failed", seconds=0.0, detail=why)
    if not compatible.get(builder.NAME, False):
        why = "DeepSpeed reports it incompatible with this machine"
        return OpBuild(op=op, name=builder.NAME, status="skipped", seconds=0.0, detail=why)
    if progress:
        progress(f"building {builder.NAME} (first build takes minutes)")
    return _timed_load(op, builder.NAME, lambda: builder.load(verbose=False))

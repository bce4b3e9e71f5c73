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

Where builds go (:func:`extensions_root`): the user's ``TORCH_EXTENSIONS_DIR`` where set, and
otherwise a directory of this environment's own (:func:`environment_default`). torch's own
default, ``~/.cache/torch_extensions/py311_cpu``, is one directory for every Python
environment of the user, and torch keys a build by its source paths and flags: a second
venv, clone or DeepSpeed checkout launching a job rebuilt the ops there (minutes), and the
first environment's next launch rebuilt them back. :func:`use_environment_default` puts the
choice into this process's environment, so torch here and every process launched with an
environment taken from it builds in the same place. The variable says where builds are
cached, never what a job computes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .errors import InputError
from .proc_files import held_paths

# The tracer's own extension (fingerprint/native), built by torch the way DeepSpeed builds its ops.
NATIVE_OP = "TriageNativeTracer"
# The ops a DeepSpeed run on this project's paths loads: the shared-memory allreduce that
# deepspeed.comm builds on CPU, and the Adam that a DeepSpeed "Adam"/"AdamW" config builds.
DEEPSPEED_OPS = ("ShareMemCommBuilder", "FusedAdamBuilder")
DEFAULT_OPS = (NATIVE_OP, *DEEPSPEED_OPS)


EXTENSIONS_ENV = "TORCH_EXTENSIONS_DIR"


def extensions_root() -> Path:
    """Where torch builds extensions here: the user's $TORCH_EXTENSIONS_DIR, else this
    environment's default. With the variable set torch adds no py/cu folder below it."""
    env = os.environ.get(EXTENSIONS_ENV)
    return Path(env) if env else environment_default()


def extensions_root_source() -> str:
    """Why :func:`extensions_root` is where it is, in words for a person."""
    env = os.environ.get(EXTENSIONS_ENV)
    if env and Path(env) != environment_default():
        return f"the user's {EXTENSIONS_ENV}"
    return f"this environment's default; the user set no {EXTENSIONS_ENV}"


def use_environment_default() -> Path:
    """Set $TORCH_EXTENSIONS_DIR to this environment's default where the user has not set it,
    so that torch in this process and every command launched with an environment built from
    it build and find the ops in one place. A value the user set is kept as it is; an
    explicit per-launch value (a bisect probe's checkout) still wins in that launch. It
    moves where builds are cached, never what a job computes."""
    if not os.environ.get(EXTENSIONS_ENV):  # empty counts as unset: torch would build in cwd
        os.environ[EXTENSIONS_ENV] = str(environment_default())
    return Path(os.environ[EXTENSIONS_ENV])


def environment_default() -> Path:
    """``$XDG_CACHE_HOME/bitwise-triage/torch_extensions/<tag>`` (``~/.cache`` without it)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    cache = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return cache / "bitwise-triage" / "torch_extensions" / environment_tag()


def environment_tag() -> str:
    """A short name for what makes one environment's builds useless to another, readable
    first (python, torch) and then a hash of all of it (:func:`environment_identity`)."""
    ident = environment_identity()
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    torch = re.sub(r"[^A-Za-z0-9._-]", "_", ident["torch"].split(" ")[0])
    return f"py{sys.version_info.major}{sys.version_info.minor}-torch{torch}-{digest}"


def environment_identity() -> dict[str, str]:
    """What a build depends on beyond its sources and flags: the environment (its resolved
    prefix and interpreter), the torch it links, where DeepSpeed's op sources are (found,
    never imported: that takes seconds), and the ninja that runs builds: ninja 1.11 and 1.13
    keep incompatible build logs, so two ninjas sharing a directory rebuild each other's
    work, while with a directory each both stay built."""
    return {
        "prefix": str(Path(sys.prefix).resolve()),
        "python": f"{sys.implementation.cache_tag}{getattr(sys, 'abiflags', '')}",
        "torch": f"{_dist_version('torch')} {_origin('torch')}",
        "deepspeed": _origin("deepspeed"),
        "ninja": _ninja_version(runs_ninja()),
    }


@functools.cache
def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "none"


@functools.cache
def _origin(name: str) -> str:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return "none"
    return str(Path(spec.origin).resolve())


def runs_path() -> str:
    """The PATH a launched run gets (:func:`triage_agent.runs.launch_env`): the interpreter's
    bin directory first, so its ninja is the one builds use."""
    bindir = str(Path(sys.executable).parent)
    return bindir + os.pathsep + os.environ.get("PATH", "")


def runs_ninja() -> str | None:
    return shutil.which("ninja", path=runs_path())


@functools.cache
def _ninja_version(exe: str | None) -> str:
    if exe is None:
        return "none"
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return f"unknown ({exe})"
    return out.stdout.strip() or f"unknown ({exe})"


@contextmanager
def runs_ninja_first() -> Iterator[None]:
    """Build with the ninja launched runs use, the one the directory's tag names."""
    saved = os.environ.get("PATH")
    os.environ["PATH"] = runs_path()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = saved


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


def ninja_on_path() -> str:
    """The ninja builds here and launched runs use (:func:`runs_path`), with its version."""
    exe = runs_ninja()
    return "none on PATH" if exe is None else f"{exe} {_ninja_version(exe)}"


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

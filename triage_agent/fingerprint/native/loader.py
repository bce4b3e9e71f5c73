"""Build the native tracer on first use, and load it from the build cache after that.

The extension is built with ``torch.utils.cpp_extension.load``, the way DeepSpeed builds its
JIT ops: under the extensions root DeepSpeed's ops use (:func:`triage_agent.extensions_dir.extensions_root`:
the user's ``$TORCH_EXTENSIONS_DIR``, else this environment's own), rebuilt only when a
source or a flag changes, one builder at a time (torch's build lock; a lock left by a killed builder is
removed by :func:`triage_agent.jit_ops.clear_stale_locks`). A CUDA build
(``triage_native_cuda``) is made where torch sees a GPU and a CUDA toolkit; otherwise a
host-only build (``triage_native_cpu``) that digests CPU tensors and observes ops the same
way. The first build takes a minute or two: build ahead with :func:`build` (``triage record``
does so before it starts the command) so that no run pays for it inside its timeout.

An injected process (``triage trace``) never builds: it uses the extension only where
:func:`built_library` finds a current build (``triage ops build`` makes one), so a rank never
compiles inside its timeout.

``TRIAGE_NATIVE=0`` in the environment turns the native path off (the Python tracer is then
used everywhere). Where the build fails (no compiler), :func:`load` returns None and
:func:`unavailable_reason` says why, in one line.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from types import ModuleType

from ...extensions_dir import extensions_root, runs_ninja_first, use_environment_default

SOURCE_DIR = Path(__file__).resolve().parent
HOST_SOURCES = ("capture.cpp", "bindings.cpp")
CUDA_SOURCES = ("cuda_backend.cpp", "digest_kernels.cu")
DISABLE_ENV = "TRIAGE_NATIVE"

_lock = threading.Lock()
_module: ModuleType | None = None
_reason: str | None = None


def build_name() -> str:
    return "triage_native_cuda" if wants_cuda() else "triage_native_cpu"


def build_directory(name: str) -> Path:
    """Where torch's ``cpp_extension.load`` builds ``name`` (:func:`build` sets the root), found
    without importing it (``cpp_extension`` imports setuptools, a second of every rank's
    start-up)."""
    return extensions_root() / name


def built_library() -> tuple[Path | None, str]:
    """(the built library, "") where a build newer than every source is there, else (None, why)."""
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return None, f"turned off by {DISABLE_ENV}=0"
    import torch

    # a process that sees a GPU needs the CUDA build: the host-only one digests CPU tensors only
    cuda = bool(torch.cuda.is_available() and torch.version.cuda)
    name = "triage_native_cuda" if cuda else "triage_native_cpu"
    lib = build_directory(name) / f"{name}.so"
    if not lib.is_file():
        return None, f"{name} is not built here (`triage ops build` builds it)"
    sources = [*_sources(cuda), *SOURCE_DIR.glob("*.h")]
    built = lib.stat().st_mtime
    newer = [s.name for s in sources if s.stat().st_mtime > built]
    if newer:
        return None, f"{name} is older than {newer[0]} (`triage ops build` rebuilds it)"
    return lib, ""


def _sources(cuda: bool) -> list[Path]:
    return [SOURCE_DIR / s for s in HOST_SOURCES + (CUDA_SOURCES if cuda else ())]


def wants_cuda() -> bool:
    import torch
    from torch.utils import cpp_extension

    return bool(torch.cuda.is_available() and torch.version.cuda and cpp_extension.CUDA_HOME)


def build(verbose: bool = False) -> ModuleType:
    """Compile (or load the cached build of) the extension; raises if it cannot be built."""
    from torch.utils import cpp_extension

    use_environment_default()  # the root build_directory() names, the one DeepSpeed's ops use
    cuda = wants_cuda()
    sources = _sources(cuda)
    # NDEBUG as libtorch is built: RecordFunction has debug-only members, so without it the
    # inline accessors would read a different layout than the library wrote
    cflags = ["-O3", "-DNDEBUG"] + (["-DTRIAGE_WITH_CUDA"] if cuda else [])
    with runs_ninja_first():
        return cpp_extension.load(
            name=build_name(),
            sources=[str(s) for s in sources],
            extra_cflags=cflags,
            extra_cuda_cflags=["-O3"],
            extra_include_paths=[str(SOURCE_DIR)],
            with_cuda=cuda,
            verbose=verbose,
        )


def load(verbose: bool = False, *, build_missing: bool = True) -> ModuleType | None:
    """The extension, built on first use; None where it is turned off or cannot be built.

    With ``build_missing`` false nothing is compiled and ninja is not run: the current build
    (:func:`built_library`) is imported as it is, else None. A rank whose environment gives
    torch other compiler flags would otherwise rebuild it inside its timeout.
    """
    global _module, _reason
    with _lock:
        if _module is not None or _reason is not None:
            return _module
        if os.environ.get(DISABLE_ENV, "1") == "0":
            _reason = f"turned off by {DISABLE_ENV}=0"
            return None
        try:
            _module = build(verbose) if build_missing else _import_built()
        except Exception as exc:  # noqa: BLE001 - a failed build of any kind means "use Python"
            lines = [ln for ln in str(exc).splitlines() if ln.strip()]
            _reason = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]
        return _module


def _import_built() -> ModuleType | None:
    global _reason
    lib, why = built_library()
    if lib is None:
        _reason = why
        return None
    import torch  # noqa: F401 - libtorch is loaded before the extension that links it

    spec = importlib.util.spec_from_file_location(lib.stem, lib)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unavailable_reason() -> str | None:
    return _reason

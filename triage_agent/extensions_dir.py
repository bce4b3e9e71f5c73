"""Where torch builds C++ extensions for this environment, and with which ninja.

Builds go to the user's ``TORCH_EXTENSIONS_DIR`` where set, and otherwise to a directory of
this environment's own (:func:`environment_default`). torch's own default,
``~/.cache/torch_extensions/py311_cpu``, is one directory for every Python environment of the
user, and torch keys a build by its source paths and flags: a second venv, clone or
DeepSpeed checkout launching a job rebuilt the ops there (minutes), and the first
environment's next launch rebuilt them back. :func:`use_environment_default` puts the choice
into this process's environment, so torch here and every process launched with an
environment taken from it builds in the same place. The variable says where builds are
cached, never what a job computes.

DeepSpeed's ops and the tracer's own extension (:mod:`triage_agent.jit_ops`,
:mod:`triage_agent.fingerprint.native.loader`) are both built here.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


def ninja_on_path() -> str:
    """The ninja builds here and launched runs use (:func:`runs_path`), with its version."""
    exe = runs_ninja()
    return "none on PATH" if exe is None else f"{exe} {_ninja_version(exe)}"

"""What the injected ``sitecustomize`` does in each process of a traced command.

1. Read and validate the :class:`CaptureConfig` named by ``TRIAGE_CAPTURE_CONFIG``; a bad
   file (or an unknown policy) stops the process with a one-line message and exit code 2,
   rather than letting it run untraced or without the policy.
2. Apply ``config.policies`` (always, also for level ``none``: a policy-only relaunch).
3. Apply the function patches (suppress / replace) of the file named by ``TRIAGE_PATCHES``,
   now for modules already imported and on first import for the others; a bad file stops
   the process the same way.
4. Unless the level is ``none``, install a tracer with automatic step boundaries, closed at
   exit (``status: error`` when the process dies of an exception): the C++ one
   (:class:`~..native.NativeTracer`) where its build is there and it can trace this config,
   else the Python :class:`Tracer`, with a note in the end record saying why; the trace
   header's ``tracer`` names the one that wrote.
5. Run any other ``sitecustomize`` that ours shadows on ``sys.path``.
"""

from __future__ import annotations

import atexit
import os
import sys

from pydantic import ValidationError

from ...errors import TriageError
from ...policies import PATCHES_ENV, PatchFile, apply_patches
from ...site_chain import chain_next
from ..config import CONFIG_ENV, load_config
from . import INJECT_DIR

_state: dict[str, object] = {}


def main() -> None:
    _patch()
    path = os.environ.get(CONFIG_ENV)
    if path:
        try:
            config = load_config(path)
        except (TriageError, ValidationError) as exc:
            msg = (
                str(exc).splitlines()[0] if isinstance(exc, TriageError) else exc.errors()[0]["msg"]
            )
            _die(f"invalid capture config {path}: {msg}")
        from ... import policies

        try:
            policies.apply_all(config.policies)
        except TriageError as exc:
            # site.py swallows ordinary exceptions from sitecustomize: the run would go on
            # without the policy it was relaunched for, so stop it here
            _die(str(exc).splitlines()[0])
        except Exception as exc:  # noqa: BLE001 - the same: a policy that failed to install
            # would leave a rerun that tested nothing, read as a refutation
            first = (str(exc).splitlines() or [""])[0]
            _die(f"cannot apply the policies {config.policies}: {type(exc).__name__}: {first}")
        if config.level != "none":
            _install(config)
    _chain()


def _patch() -> None:
    path = os.environ.get(PATCHES_ENV)
    if not path:
        return
    try:
        with open(path) as f:
            spec = PatchFile.model_validate_json(f.read())
        apply_patches(spec)
    except OSError as exc:
        _die(f"cannot read the patch file {path}: {exc.strerror}")
    except ValidationError as exc:
        _die(f"invalid patch file {path}: {exc.errors()[0]['msg']}")
    except TriageError as exc:
        _die(str(exc).splitlines()[0])


def _die(msg: str) -> None:
    # SystemExit inside site start-up is a fatal interpreter error with a traceback;
    # the user gets one line and exit code 2 instead
    sys.stderr.write(f"triage capture: {msg}\n")
    sys.stderr.flush()
    os._exit(2)


def _install(config) -> None:
    from ..native import injected_tracer

    tracer = injected_tracer(config, auto_steps=True).install()
    _state["tracer"] = tracer
    prev_hook = sys.excepthook

    def excepthook(etype, value, tb):
        _state["error"] = f"{etype.__name__}: {value}"[:500]
        prev_hook(etype, value, tb)

    sys.excepthook = excepthook
    atexit.register(_finish)


def _finish() -> None:
    tracer = _state.get("tracer")
    if tracer is None:
        return
    err = _state.get("error")
    tracer.close("error" if err else "ok", str(err or ""))


def _chain() -> None:
    """Run the sitecustomize ours shadows, if any, as Python would have."""
    chain_next({str(INJECT_DIR)})

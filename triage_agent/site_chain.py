"""Running the ``sitecustomize`` that an injected one shadows, as Python would have.

Several start-up hooks of this package can stand on one ``PYTHONPATH`` (the tracer's, the
state capture's), and a job may bring its own. Each of ours runs the next one it finds on
``sys.path``. Skipping only its own directory is not enough: when two copies of this package
meet in one launch (a checkout on ``PYTHONPATH`` and an installed one), each copy's hook
finds the other's, and the two chain into each other until the interpreter gives up. Every
``sitecustomize`` already run in this process is remembered, so each runs once.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_RAN = "_triage_sitecustomize_ran"


def chain_next(skip_dirs: set[str]) -> None:
    """Run the first ``sitecustomize`` on ``sys.path`` that neither lies in ``skip_dirs`` nor
    has run in this process."""
    ran: set[str] = getattr(sys, _RAN, None) or set()
    first = getattr(sys.modules.get("sitecustomize"), "__file__", None)
    if first:
        ran.add(os.path.realpath(first))
    setattr(sys, _RAN, ran)
    for entry in sys.path:
        if not entry or os.path.abspath(entry) in skip_dirs:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is None or spec.loader is None or spec.origin is None:
            continue
        origin = os.path.realpath(spec.origin)
        if origin in ran:
            continue
        ran.add(origin)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        return

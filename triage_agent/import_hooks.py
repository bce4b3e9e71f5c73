"""Callbacks run on a module right after its first import, before any importer sees its names
(:func:`on_import`, one finder on ``sys.meta_path`` per call).

How the code injected into the job's processes reaches the job's modules: the function
patches and restores of :mod:`triage_agent.policies` and :mod:`triage_agent.restore_state`,
the state capture, the write watch and the tracer. It imports nothing the job would not.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from typing import Any

_RESOLVING: set[str] = set()  # module names a watcher is resolving through the other finders


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs callbacks on a module right after it executes, on its first import, before any
    importer sees its names. One finder serves the function patches and the tracer alike."""

    def __init__(self, pending: dict[str, list[Callable[[Any], None]]]):
        self.pending = pending

    def find_spec(self, name, path, target=None):  # noqa: ANN001 - the finder protocol
        if name not in self.pending or name in _RESOLVING:
            # another watcher of the same module is asking the finders: answer as they would
            # (two watchers asking each other would never end)
            return None
        others = [f for f in sys.meta_path if f is not self and hasattr(f, "find_spec")]
        _RESOLVING.add(name)
        try:
            spec = next(
                (s for f in others if (s := f.find_spec(name, path, target)) is not None), None
            )
        finally:
            _RESOLVING.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        callbacks = self.pending.pop(name)
        for f in others:  # every other watcher of this module runs its callbacks too
            if isinstance(f, _PatchOnImport) and name in f.pending:
                callbacks += f.pending.pop(name)
        if isinstance(spec.loader, type):
            # the builtin and frozen importers are classes shared by every such module
            spec.loader = _ThenRun(spec.loader, callbacks)
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):  # noqa: ANN001, ANN202
            run_module(module)
            for callback in callbacks:
                callback(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class _ThenRun(importlib.abc.Loader):
    def __init__(self, loader: Any, callbacks: list[Callable[[Any], None]]):
        self.loader, self.callbacks = loader, callbacks

    def create_module(self, spec):  # noqa: ANN001, ANN201
        return self.loader.create_module(spec)

    def exec_module(self, module):  # noqa: ANN001, ANN201
        self.loader.exec_module(module)
        for callback in self.callbacks:
            callback(module)


def on_import(pending: dict[str, list[Callable[[Any], None]]]) -> importlib.abc.MetaPathFinder:
    """Run ``pending[name]``'s callbacks on module ``name`` right after its first import.

    Returns the finder, first on ``sys.meta_path``; remove it from there to stop watching.
    """
    finder = _PatchOnImport(pending)
    sys.meta_path.insert(0, finder)
    return finder

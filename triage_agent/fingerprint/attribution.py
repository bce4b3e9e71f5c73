"""Module scopes: fully qualified names for the modules a traced process calls.

Names are found lazily: the first time a module runs with no traced module around it, it
becomes a root and its ``named_modules()`` are indexed. Training wrappers (DeepSpeedEngine,
DistributedDataParallel, FSDP) are unwrapped so that a DeepSpeed run and a plain one name
the same layer the same way (``layers.3.mlp``, not ``module.layers.3.mlp``).

Limits: in backward, the scope of an ATen op is the module whose output gradient arrived
last (the module being differentiated, as seen from its output); ops between two child
modules of a block are attributed to the child that ran before them in backward.
"""

from __future__ import annotations

import weakref

import torch

_WRAPPERS = {
    "DeepSpeedEngine",
    "PipelineEngine",
    "DistributedDataParallel",
    "FullyShardedDataParallel",
}


class ScopeIndex:
    def __init__(self) -> None:
        self._names: weakref.WeakKeyDictionary[torch.nn.Module, str] = weakref.WeakKeyDictionary()
        self.param_names: dict[int, str] = {}

    def name_of(self, module: torch.nn.Module, parent: str | None) -> str:
        name = self._names.get(module)
        if name is not None:
            return name
        if parent is None:
            self._index_root(module)
            return self._names[module]
        # created after its root was indexed, or called outside its parent's tree
        name = f"{parent}.<{type(module).__name__}>" if parent else f"<{type(module).__name__}>"
        self._names[module] = name
        return name

    def _index_root(self, root: torch.nn.Module) -> None:
        inner = root
        while type(inner).__name__ in _WRAPPERS and isinstance(
            getattr(inner, "module", None), torch.nn.Module
        ):
            self._names[inner] = ""
            inner = inner.module
        for name, mod in inner.named_modules(remove_duplicate=False):
            self._names.setdefault(mod, name)
        # a compiled model's parameters as the eager model names them (its module scopes
        # keep the wrapper's `_orig_mod.`: inside the compiled frame no module is seen)
        if type(inner).__name__ == "OptimizedModule" and isinstance(
            getattr(inner, "_orig_mod", None), torch.nn.Module
        ):
            inner = inner._orig_mod
        for name, p in inner.named_parameters(remove_duplicate=False):
            self.param_names.setdefault(id(p), name)

"""Seedings of the generators a job makes itself (``torch.Generator()``), seen as they happen.

``torch.Generator`` is a C type whose methods cannot be wrapped in place, so it is replaced by
a subclass whose ``manual_seed`` and ``set_state`` call one hook first. The hook sees the value
and may give another (a seed pin does; the state capture only records). Generators made
before the replacement (``torch.default_generator``, CUDA's) are not these objects; their
seedings go through ``torch.manual_seed``, which the callers wrap as module functions.

``isinstance(g, torch.Generator)`` keeps holding for every generator, made before or after,
so the job sees no difference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (method name, value) -> the value to use
Hook = Callable[[str, Any], Any]


def watch_generators(torch: Any, hook: Hook) -> None:
    """Route every later ``torch.Generator(...).manual_seed``/``set_state`` through ``hook``.

    Several watchers stack: each wraps the class the previous one installed."""
    base = torch.Generator
    root = getattr(base, "_triage_root", base)

    class _Meta(type(base)):  # type: ignore[misc]
        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, root)

        def __subclasscheck__(cls, sub: type) -> bool:
            return issubclass(sub, root)

    class Generator(base, metaclass=_Meta):  # type: ignore[misc, valid-type]
        _triage_root = root

        def manual_seed(self, seed: Any) -> Any:
            return super().manual_seed(hook("torch.Generator.manual_seed", seed))

        def set_state(self, state: Any) -> Any:
            return super().set_state(hook("torch.Generator.set_state", state))

    Generator.__module__, Generator.__qualname__ = root.__module__, root.__qualname__
    torch.Generator = Generator

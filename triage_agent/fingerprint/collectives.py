"""Which arguments of each torch.distributed collective are inputs and which are outputs.

Inputs are digested before launch; outputs after completion: at return for a blocking
call, at ``wait()`` for an async handle (hashing an async destination earlier would
record a buffer the collective has not written yet: a probe artifact, not a divergence).
deepspeed.comm calls these functions through ``torch.distributed`` at call time, so wrapping
the module attributes covers it.
"""

from __future__ import annotations

from typing import Any

# name -> (input parameter names, output parameter names)
SPECS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "all_reduce": (("tensor",), ("tensor",)),
    "all_reduce_coalesced": (("tensors",), ("tensors",)),
    "broadcast": (("tensor",), ("tensor",)),
    "reduce": (("tensor",), ("tensor",)),
    "all_gather": (("tensor",), ("tensor_list",)),
    "all_gather_into_tensor": (("input_tensor",), ("output_tensor",)),
    "_all_gather_base": (("input_tensor",), ("output_tensor",)),
    "reduce_scatter": (("input_list",), ("output",)),
    "reduce_scatter_tensor": (("input",), ("output",)),
    "_reduce_scatter_base": (("input",), ("output",)),
    "all_to_all_single": (("input",), ("output",)),
    "all_to_all": (("input_tensor_list",), ("output_tensor_list",)),
    "send": (("tensor",), ()),
    "isend": (("tensor",), ()),
    "recv": ((), ("tensor",)),
    "irecv": ((), ("tensor",)),
    "gather": (("tensor",), ("gather_list",)),
    "scatter": (("scatter_list",), ("tensor",)),
}
ALWAYS_ASYNC = {"isend", "irecv"}


class TracedWork:
    """Proxy for an async collective handle: the destination is digested at ``wait()``."""

    def __init__(self, work: Any, on_complete: Any):
        self._work = work
        self._on_complete = on_complete

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        result = self._work.wait(*args, **kwargs)
        cb, self._on_complete = self._on_complete, None
        if cb is not None:
            cb()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)

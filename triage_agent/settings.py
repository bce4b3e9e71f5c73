"""The global numeric settings a process computes under, read and set by name.

They select kernels and precisions without appearing in any argv or config file: a launch
that enables TF32 or reduced-precision reductions, a job that sets its own thread count,
deterministic algorithms turned on in one run. The state capture records them at every
boundary (:mod:`.boundary_capture`), so two runs that differ in one show it as a declared
difference; ``set NAME=VALUE`` (:mod:`.interventions`) gives a run the other's value, applied
when the process starts and again before every module forward (a job that sets its own value
at start-up would otherwise win).

Only the names here can be read or set: nothing else is reachable through ``set``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _attr(path: str) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    *owner, name = path.split(".")

    def resolve() -> Any:
        import importlib

        obj: Any = importlib.import_module(owner[0])
        for part in owner[1:]:
            obj = getattr(obj, part)
        return obj

    return (lambda: getattr(resolve(), name)), (lambda v: setattr(resolve(), name, v))


def _torch(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _warn_only(v: bool) -> None:
    import torch

    torch.use_deterministic_algorithms(torch.are_deterministic_algorithms_enabled(), warn_only=v)


def _cpu_capability() -> str:
    import torch

    return torch.backends.cpu.get_cpu_capability()


# name -> (read, set or None when only a launch can change it)
SETTINGS: dict[str, tuple[Callable[[], Any], Callable[[Any], None] | None]] = {
    "torch.num_threads": (
        lambda: _torch("get_num_threads")(),
        lambda v: _torch("set_num_threads")(int(v)),
    ),
    "torch.float32_matmul_precision": (
        lambda: _torch("get_float32_matmul_precision")(),
        lambda v: _torch("set_float32_matmul_precision")(str(v)),
    ),
    "torch.deterministic_algorithms": (
        lambda: _torch("are_deterministic_algorithms_enabled")(),
        lambda v: _torch("use_deterministic_algorithms")(bool(v)),
    ),
    "torch.deterministic_algorithms_warn_only": (
        lambda: _torch("is_deterministic_algorithms_warn_only_enabled")(),
        lambda v: _warn_only(bool(v)),
    ),
    "torch.backends.cuda.matmul.allow_tf32": _attr("torch.backends.cuda.matmul.allow_tf32"),
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": _attr(
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction"
    ),
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": _attr(
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction"
    ),
    "torch.backends.cudnn.allow_tf32": _attr("torch.backends.cudnn.allow_tf32"),
    "torch.backends.cudnn.benchmark": _attr("torch.backends.cudnn.benchmark"),
    "torch.backends.cudnn.deterministic": _attr("torch.backends.cudnn.deterministic"),
    "torch.backends.cudnn.enabled": _attr("torch.backends.cudnn.enabled"),
    "torch.backends.mkldnn.enabled": _attr("torch.backends.mkldnn.enabled"),
    "torch.cpu_capability": (_cpu_capability, None),
}

# Settings that choose a precision: two values of one are a numerical policy by their values.
PRECISION_SETTINGS = frozenset(
    {
        "torch.float32_matmul_precision",
        "torch.backends.cuda.matmul.allow_tf32",
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
        "torch.backends.cudnn.allow_tf32",
    }
)


def read_settings() -> dict[str, str]:
    """Every setting this process can read, as its exact repr."""
    out: dict[str, str] = {}
    for name, (read, _set) in SETTINGS.items():
        try:
            out[name] = repr(read())
        except Exception:  # noqa: BLE001 - a setting this build lacks is not recorded
            continue
    return out


def settable(name: str) -> bool:
    return name in SETTINGS and SETTINGS[name][1] is not None


def apply_settings(values: dict[str, Any]) -> None:
    """Set them now and before every module forward, so a job's own start-up value is
    overridden before any of its computation reads it."""
    import torch

    def put() -> None:
        for name, v in values.items():
            setter = SETTINGS[name][1]
            if setter is not None and repr(SETTINGS[name][0]()) != repr(v):
                setter(v)

    put()
    torch.nn.modules.module.register_module_forward_pre_hook(lambda _m, _a: put())

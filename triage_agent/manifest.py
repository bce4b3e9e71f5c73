"""State manifests: what a training state holds, bit for bit, before save and after load.

``build_manifest`` walks a DeepSpeed engine, a module, an optimizer, or any nested state
dict: every tensor gets dtype, shape, byte count and the sha256 of its raw bytes; every
scalar is kept exactly (floats as ``float.hex``). Every RNG stream is recorded: Python
``random``, NumPy's global generator, torch CPU, each CUDA device, and the DeepSpeed and
Megatron model-parallel RNG trackers when those packages are already imported. A data
cursor (consumed samples, epoch, ...) is recorded when given.

For a DeepSpeed engine the manifest holds the module's state dict (``model.*``), the
optimizer's state dict (``optimizer.*``: for ZeRO 1/2 the fp32 master partitions and the
base optimizer's moments and step counters; each rank has its own partition, so build one
manifest per rank), the LR scheduler (``scheduler.*``) and the engine counters
(``engine.*``). Manifests are JSON; ``diff_manifests`` says which entries differ and how.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import random
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from .errors import InputError
from .records import utcnow

MANIFEST_VERSION = 1


class TensorEntry(BaseModel):
    dtype: str
    shape: list[int]
    bytes: int
    sha256: str


class StateManifest(BaseModel):
    # read back from a file, every manifest names its version: '{}' is not a manifest
    version: int = Field(ge=1, le=MANIFEST_VERSION)
    created: str = Field(default_factory=utcnow)
    label: str = ""
    rank: int = 0
    tensors: dict[str, TensorEntry] = Field(default_factory=dict)
    scalars: dict[str, str] = Field(default_factory=dict, description="path -> exact repr")
    rng: dict[str, str] = Field(default_factory=dict, description="stream -> sha256 of its state")
    data_cursor: dict[str, Any] | None = None
    module_globals: dict[str, Any] = Field(
        default_factory=dict,
        description="module.name -> plain value of the job's own modules' module-level values",
    )
    settings: dict[str, str] = Field(
        default_factory=dict,
        description="the global numeric settings the process computes under, name -> repr",
    )


class AttrWrite(BaseModel):
    """One write to an attribute of a watched object (a data cursor), and who made it.

    ``target`` is the function through which the write entered the object's module, as
    ``pkg.mod:Qual.name`` (what a ``suppress`` intervention names); ``caller`` is the frame
    that called it, in the job's code (``file:line``), with its function."""

    obj: str = Field(description="the object's class, pkg.mod:Qual, and #k when several")
    attr: str
    value: str = Field(description="the value written, exact for scalars, a type for others")
    target: str
    site: str = Field(description="file:line of the assignment")
    caller: str | None = None
    caller_function: str | None = None


class SeedCall(BaseModel):
    """One seeding of a generator (``torch.manual_seed``, ``random.seed``, ``set_rng_state``
    ...): what was called, with what value (a digest for a state), and from where in the
    job's code."""

    fn: str
    value: str
    caller: str | None = Field(default=None, description="file:line (function) of the call")
    path: list[str] = Field(
        default_factory=list,
        description="file:line of each of the job's frames that led to the call, innermost "
        "first: two runs that make one call from one line may reach that line differently",
    )
    built: int | None = Field(
        default=None,
        description="parameters the process had registered on modules when it seeded: a "
        "seeding before a model is built and one after it are the same call in another order",
    )


class BoundaryRecord(BaseModel):
    """The state one process holds at one step boundary (see triage_agent.boundary_capture).

    ``point`` is ``init`` (the first forward of a process that did not resume: after
    initialisation, before step 0 computes), ``after-K`` (the job reported step K, or a
    process resumed from K), ``step-K`` (the first forward of step K: its ``batch.*``
    tensors are the inputs that step consumed) or ``end-K`` (a process whose last reported
    step is K, as it wrote a checkpoint with ``torch.save``, else at its exit). ``writes`` are the writes to data cursors
    between ``after-(K-1)`` and ``step-K`` in this process."""

    point: str
    rank: int = 0
    pid: int
    manifest: StateManifest
    writes: list[AttrWrite] = Field(default_factory=list)
    seeds: list[SeedCall] = Field(
        default_factory=list,
        description="generators seeded in this process since its previous record",
    )
    draws: dict[str, int] = Field(
        default_factory=dict,
        description="draws from numpy's and python's global generators since the previous "
        "record: 'fn at file:line (function)' -> how many",
    )


class EntryDiff(BaseModel):
    path: str
    section: str
    reason: str
    a: str | None = None
    b: str | None = None


class ManifestDiff(BaseModel):
    equal: bool
    differences: list[EntryDiff] = Field(default_factory=list)
    only_in_a: list[str] = Field(default_factory=list)
    only_in_b: list[str] = Field(default_factory=list)
    compared: int = 0


def tensor_entry(t: Any) -> TensorEntry:
    import torch

    x = t.detach()
    if x.is_complex():
        x = torch.view_as_real(x.resolve_conj())
    x = x.to("cpu").contiguous().reshape(-1)
    raw = x.view(torch.uint8) if x.numel() else x.new_empty(0, dtype=torch.uint8)
    return TensorEntry(
        dtype=str(t.dtype).removeprefix("torch."),
        shape=list(t.shape),
        bytes=raw.numel(),
        sha256=hashlib.sha256(raw.numpy().tobytes()).hexdigest(),
    )


def _scalar(v: Any) -> str:
    if isinstance(v, float):
        return f"float:{v.hex()}"
    if isinstance(v, bool | int | str | type(None)):
        return f"{type(v).__name__}:{v!r}"
    return f"{type(v).__name__}:{v!r}"[:500]


def _walk(obj: Any, path: str, m: StateManifest, depth: int = 0) -> None:
    import torch

    if depth > 64:
        raise InputError(f"state nested deeper than 64 levels at {path!r}")
    if isinstance(obj, torch.Tensor):
        m.tensors[path] = tensor_entry(obj)
    elif isinstance(obj, dict):
        for k in sorted(obj, key=repr):
            _walk(obj[k], f"{path}.{k}" if path else str(k), m, depth + 1)
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            _walk(v, f"{path}[{i}]", m, depth + 1)
    elif hasattr(obj, "item") and hasattr(obj, "dtype") and hasattr(obj, "tobytes"):  # numpy
        m.scalars[path] = f"numpy.{obj.dtype}:{obj.tobytes().hex()}"[:4096]
    else:
        m.scalars[path] = _scalar(obj)


def _sha(obj: Any) -> str:
    torch = sys.modules.get("torch")  # not imported: nothing here is a tensor
    if torch is not None and isinstance(obj, torch.Tensor):
        return tensor_entry(obj).sha256
    return hashlib.sha256(pickle.dumps(obj, protocol=4)).hexdigest()


def rng_streams() -> dict[str, str]:
    """sha256 of every RNG stream this process can see."""
    import torch

    out = {"python": _sha(random.getstate()), "torch_cpu": _sha(torch.get_rng_state())}
    np = sys.modules.get("numpy")
    if np is not None:
        out["numpy"] = _sha(np.random.get_state())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i in range(torch.cuda.device_count()):
            out[f"cuda:{i}"] = _sha(torch.cuda.get_rng_state(i))
    trackers = (
        ("deepspeed", "deepspeed.runtime.activation_checkpointing.checkpointing"),
        ("megatron", "megatron.core.tensor_parallel.random"),
    )
    for label, modname in trackers:
        mod = sys.modules.get(modname)
        get = getattr(mod, "get_cuda_rng_tracker", None) if mod else None
        if get is None:
            continue
        states = get().get_states()
        for name in sorted(states):
            out[f"{label}_tracker:{name}"] = _sha(states[name])
        out[f"{label}_tracker"] = f"{len(states)} states"
    return out


def build_manifest(
    engine_or_state: Any,
    *,
    data_cursor: dict[str, Any] | None = None,
    label: str = "",
    rank: int | None = None,
    include_rng: bool = True,
) -> StateManifest:
    """Manifest of a DeepSpeed engine, an nn.Module, an optimizer, or a (nested) state dict."""
    import torch

    if rank is None:
        dist = torch.distributed
        rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    m = StateManifest(version=MANIFEST_VERSION, label=label, rank=rank, data_cursor=data_cursor)
    obj = engine_or_state
    if type(obj).__name__ in ("DeepSpeedEngine", "PipelineEngine"):
        _walk(obj.module.state_dict(), "model", m)
        if obj.optimizer is not None:
            _walk(obj.optimizer.state_dict(), "optimizer", m)
        if getattr(obj, "lr_scheduler", None) is not None:
            _walk(obj.lr_scheduler.state_dict(), "scheduler", m)
        for k in ("global_steps", "global_samples", "micro_steps", "skipped_steps"):
            if hasattr(obj, k):
                m.scalars[f"engine.{k}"] = _scalar(getattr(obj, k))
    elif isinstance(obj, torch.nn.Module | torch.optim.Optimizer):
        _walk(obj.state_dict(), "model" if isinstance(obj, torch.nn.Module) else "optimizer", m)
    elif isinstance(obj, dict):
        _walk(obj, "", m)
    else:
        raise InputError(f"cannot build a manifest of a {type(obj).__name__}")
    if include_rng:
        m.rng = rng_streams()
    return m


def save_manifest(m: StateManifest, path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(m.model_dump_json(indent=1))
    os.replace(tmp, p)
    return p


def load_manifest(path: str | os.PathLike[str]) -> StateManifest:
    p = Path(path)
    try:
        return StateManifest.model_validate_json(p.read_text())
    except OSError as exc:
        raise InputError(f"cannot read manifest {p}: {exc.strerror}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "document"
        raise InputError(f"{p} is not a state manifest: {where}: {err['msg']}") from None
    except ValueError as exc:
        raise InputError(f"{p} is not a state manifest: {str(exc).splitlines()[0]}") from None


def diff_manifests(a: StateManifest, b: StateManifest) -> ManifestDiff:
    diffs: list[EntryDiff] = []
    only_a: list[str] = []
    only_b: list[str] = []
    compared = 0
    for section, da, db in (
        ("tensor", a.tensors, b.tensors),
        ("scalar", a.scalars, b.scalars),
        ("rng", a.rng, b.rng),
        ("setting", a.settings, b.settings),
        ("global", a.module_globals, b.module_globals),
    ):
        only_a += [f"{section}:{k}" for k in sorted(set(da) - set(db))]
        only_b += [f"{section}:{k}" for k in sorted(set(db) - set(da))]
        for k in sorted(set(da) & set(db)):
            compared += 1
            va, vb = da[k], db[k]
            if va == vb:
                continue
            if isinstance(va, TensorEntry):
                for field in ("dtype", "shape", "sha256"):
                    if getattr(va, field) != getattr(vb, field):
                        diffs.append(
                            EntryDiff(
                                path=k,
                                section=section,
                                reason=field,
                                a=str(getattr(va, field)),
                                b=str(getattr(vb, field)),
                            )
                        )
                        break
            else:
                a_s, b_s = (repr(v) if section == "global" else v for v in (va, vb))
                diffs.append(EntryDiff(path=k, section=section, reason="value", a=a_s, b=b_s))
    if a.data_cursor != b.data_cursor:
        diffs.append(
            EntryDiff(
                path="data_cursor",
                section="data",
                reason="value",
                a=repr(a.data_cursor),
                b=repr(b.data_cursor),
            )
        )
    equal = not diffs and not only_a and not only_b
    return ManifestDiff(
        equal=equal, differences=diffs, only_in_a=only_a, only_in_b=only_b, compared=compared
    )

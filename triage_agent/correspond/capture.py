"""Dump the state at the corresponding boundaries of every step, by hooks only.

The hooks read; they never write a tensor the run uses. Each framework's own storage is
resolved to one tensor per model parameter:

- Megatron (``attach_megatron``): the fp32 main params of each mixed-precision optimizer
  (``fp32_from_float16_groups``), whose ``.grad`` is the parameter's ``main_grad`` in the
  DDP grad buffer when the inner optimizer runs;
- DeepSpeed ZeRO 1/2 (``attach_deepspeed``): the flat fp32 partition of each group
  (``single_partition_of_fp32_groups``) cut by each parameter's fragment map
  (``param._hp_mapping``: its offset in the partition and in the parameter).

Both frameworks hand the update to an inner ``torch.optim`` optimizer; its step pre-hook
reads the gradients it consumes and the settings it holds, its post-hook the master weights,
moments and counters it wrote. The model's outputs (and the named submodules') come from
forward hooks. A step is written when the next forward starts, or at ``close``.

Layout of a capture directory: ``side.json`` (``SideMeta``), ``init.pt`` (every model
parameter as the run starts), ``step0000.pt`` ... (``{boundary: {name: tensor}}``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .model import BOUNDARIES, SIDE_VERSION, SideMeta, TensorSite


@dataclass
class _Fragment:
    name: str
    start: int
    numel: int
    shape: tuple[int, ...]


@dataclass
class _Resolved:
    inners: list[Any]
    fragments: dict[int, list[_Fragment]] = field(default_factory=dict)
    sites: list[TensorSite] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    check: str = ""


def _setting(v: Any) -> str:
    if isinstance(v, float):
        return f"float:{v.hex()}"
    if isinstance(v, tuple | list):
        return "(" + ", ".join(_setting(x) for x in v) + ")"
    if hasattr(v, "dtype") and hasattr(v, "numel") and v.numel() == 1:  # a tensor lr/step
        return f"tensor:{_setting(float(v.item()))}"
    return f"{type(v).__name__}:{v!r}"[:200]


def _cpu(t: Any) -> Any:
    return t.detach().to("cpu", copy=True)


def _first_tensor(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, tuple | list):
        for x in out:
            if isinstance(x, torch.Tensor):
                return x
    return None


def normalise(name: str) -> str:
    """A parameter or module name without the wrappers' ``module.`` prefixes."""
    while name.startswith("module."):
        name = name[len("module.") :]
    return name


class BoundaryCapture:
    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        framework: str,
        root: Any,
        resolved: _Resolved,
        wrapper: str,
        outputs: tuple[str, ...],
        clip: float | None = None,
    ) -> None:
        import torch

        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.step = 0
        self._resolved = resolved
        self._pending: dict[str, dict[str, Any]] = {b: {} for b in BOUNDARIES}
        self._settings: dict[str, dict[str, str]] = {}
        self._handles: list[Any] = []
        names = ["model"]
        self._handles.append(root.register_forward_pre_hook(self._on_forward))
        self._handles.append(root.register_forward_hook(self._output_hook("model")))
        for mname, mod in root.named_modules():
            if mname and normalise(mname) in outputs:
                names.append(normalise(mname))
                self._handles.append(mod.register_forward_hook(self._output_hook(names[-1])))
        for inner in resolved.inners:
            self._handles.append(inner.register_step_pre_hook(self._pre))
            self._handles.append(inner.register_step_post_hook(self._post))
        self.meta = SideMeta(
            version=SIDE_VERSION,
            framework=framework,  # type: ignore[arg-type]
            versions=_versions(),
            optimizer=", ".join(
                sorted({type(i).__module__ + "." + type(i).__name__ for i in resolved.inners})
            ),
            wrapper=wrapper,
            sites=resolved.sites,
            outputs=names,
            clip=clip,
            resolution_check=resolved.check,
        )
        torch.save({n: _cpu(p) for n, p in resolved.params.items()}, self.dir / "init.pt")
        self._write_meta()

    # -- hooks -------------------------------------------------------------------------------
    def _on_forward(self, module: Any, args: Any) -> None:
        if self._pending["grads"] or self._pending["master_weights"]:
            self._flush()

    def _output_hook(self, name: str):
        def hook(module: Any, args: Any, out: Any) -> None:
            t = _first_tensor(out)
            if t is not None:
                self._pending["outputs"][name] = _cpu(t)

        return hook

    def _each(self, inner: Any):
        for group in inner.param_groups:
            for p in group["params"]:
                for frag in self._resolved.fragments.get(id(p), ()):
                    yield group, p, frag

    @staticmethod
    def _cut(t: Any, frag: _Fragment) -> Any:
        return _cpu(t.reshape(-1).narrow(0, frag.start, frag.numel).view(frag.shape))

    def _pre(self, inner: Any, args: Any, kwargs: Any) -> None:
        for group, p, frag in self._each(inner):
            if p.grad is not None:
                self._pending["grads"][frag.name] = self._cut(p.grad, frag)
            self._settings[frag.name] = {
                k: _setting(v) for k, v in sorted(group.items()) if k != "params"
            }

    def _post(self, inner: Any, args: Any, kwargs: Any) -> None:
        import torch

        for _group, p, frag in self._each(inner):
            self._pending["master_weights"][frag.name] = self._cut(p, frag)
            for key, v in inner.state.get(p, {}).items():
                if isinstance(v, torch.Tensor) and v.numel() == p.numel() and v.numel() > 1:
                    self._pending["moments"][f"{key}:{frag.name}"] = self._cut(v, frag)
                elif isinstance(v, torch.Tensor) and v.numel() == 1 or isinstance(v, int | float):
                    self._pending["counters"][f"{key}:{frag.name}"] = (
                        _cpu(v) if isinstance(v, torch.Tensor) else torch.tensor(v)
                    )

    # -- files -------------------------------------------------------------------------------
    def _flush(self) -> None:
        import torch

        tmp = self.dir / f"step{self.step:04d}.pt.tmp"
        torch.save(self._pending, tmp)
        os.replace(tmp, self.dir / f"step{self.step:04d}.pt")
        self.meta.settings[self.step] = dict(self._settings)
        self.step += 1
        self.meta.steps = self.step
        self._pending = {b: {} for b in BOUNDARIES}
        self._settings = {}
        self._write_meta()

    def _write_meta(self) -> None:
        tmp = self.dir / "side.json.tmp"
        tmp.write_text(self.meta.model_dump_json(indent=1))
        os.replace(tmp, self.dir / "side.json")

    def close(self) -> None:
        if any(self._pending.values()):
            self._flush()
        for h in self._handles:
            h.remove()
        self._handles = []


def _versions() -> dict[str, str | None]:
    import sys

    import torch

    out: dict[str, str | None] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    for mod in ("deepspeed", "megatron.core"):
        m = sys.modules.get(mod)
        out[mod] = getattr(m, "__version__", None) if m else None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["gpu"] = torch.cuda.get_device_name()
    return out


def _names(module: Any) -> dict[int, str]:
    return {id(p): n for n, p in module.named_parameters()}


# -- Megatron ----------------------------------------------------------------------------------
def _grad_buffer_site(model: Any, lp: Any) -> str:
    for b, buf in enumerate(getattr(model, "buffers", None) or ()):
        index = getattr(buf, "param_index_map", {})
        if lp in index:
            start, end = index[lp][0], index[lp][1]
            return f"ddp.buffers[{b}].grad_data[{start}:{end}] ({getattr(buf, 'grad_dtype', '?')})"
    return "main_grad (not found in a DDP grad buffer)"


def resolve_megatron(model: Any, optimizer: Any) -> _Resolved:
    """Each mixed-precision optimizer's main params, paired with the model params they
    master (``float16_groups[g][j]`` -> ``fp32_from_float16_groups[g][j]``)."""
    names = _names(model)
    subs = getattr(optimizer, "chained_optimizers", None) or [optimizer]
    out = _Resolved(inners=[])
    for sub in subs:
        out.inners.append(sub.optimizer)
        pairs = [
            (
                "fp32_from_float16_groups",
                getattr(sub, "float16_groups", []),
                getattr(sub, "fp32_from_float16_groups", []),
            ),
            (
                "fp32_from_fp32_groups",
                getattr(sub, "fp32_from_fp32_groups", []),
                getattr(sub, "fp32_from_fp32_groups", []),
            ),
        ]
        for label, lp_groups, hp_groups in pairs:
            for g, (lps, hps) in enumerate(zip(lp_groups, hp_groups, strict=True)):
                for j, (lp, hp) in enumerate(zip(lps, hps, strict=True)):
                    name = names.get(id(lp), f"<unnamed {label}[{g}][{j}]>")
                    out.sites.append(
                        TensorSite(
                            name=name,
                            shape=list(lp.shape),
                            dtype=str(lp.dtype).removeprefix("torch."),
                            master=f"{label}[{g}][{j}] ({str(hp.dtype).removeprefix('torch.')})",
                            grad=_grad_buffer_site(model, lp),
                            group=g,
                        )
                    )
                    out.fragments.setdefault(id(hp), []).append(
                        _Fragment(name, 0, hp.numel(), tuple(lp.shape))
                    )
                    out.params[name] = lp
    return out


def attach_megatron(
    out_dir: str | os.PathLike[str], model: Any, optimizer: Any, *, outputs: tuple[str, ...] = ()
) -> BoundaryCapture:
    subs = getattr(optimizer, "chained_optimizers", None) or [optimizer]
    wrapper = ", ".join(sorted({type(s).__name__ for s in subs}))
    clip = getattr(getattr(subs[0], "config", None), "clip_grad", None)
    return BoundaryCapture(
        out_dir, "megatron", model, resolve_megatron(model, optimizer), wrapper, outputs, clip
    )


# -- DeepSpeed ---------------------------------------------------------------------------------
def resolve_deepspeed(engine: Any) -> _Resolved:
    """ZeRO 1/2: each group's flat fp32 partition, cut by every parameter's fragment map."""
    opt = engine.optimizer
    if not hasattr(opt, "single_partition_of_fp32_groups"):
        from ..errors import InputError

        raise InputError(
            f"{type(opt).__name__} holds no flat fp32 partitions: only ZeRO stage 1 and 2 are resolved"
        )
    names = _names(engine.module)
    out = _Resolved(inners=[opt.optimizer])
    for i, group in enumerate(opt.bit16_groups):
        flat = opt.single_partition_of_fp32_groups[i]
        for lp in group:
            name = names.get(id(lp), f"<unnamed bit16_groups[{i}]>")
            m = getattr(lp, "_hp_mapping", None)
            if m is None:  # held by another rank's partition
                continue
            hp, lpa = m.hp_fragment_address, m.lp_fragment_address
            whole = lpa.start == 0 and lpa.numel == lp.numel()
            if not whole:
                name = f"{name}[{lpa.start}:{lpa.start + lpa.numel}]"
            where = f"single_partition_of_fp32_groups[{i}][{hp.start}:{hp.start + hp.numel}]"
            out.sites.append(
                TensorSite(
                    name=name,
                    shape=list(lp.shape) if whole else [lpa.numel],
                    dtype=str(lp.dtype).removeprefix("torch."),
                    master=f"{where} ({str(flat.dtype).removeprefix('torch.')})",
                    grad=f"single_partition_of_fp32_groups[{i}].grad[{hp.start}:{hp.start + hp.numel}]",
                    group=i,
                )
            )
            shape = tuple(lp.shape) if whole else (lpa.numel,)
            out.fragments.setdefault(id(flat), []).append(
                _Fragment(name, hp.start, hp.numel, shape)
            )
            out.params[name] = lp if whole else lp.reshape(-1).narrow(0, lpa.start, lpa.numel)
    out.check = _check_against_helper(opt, out)
    return out


def _check_against_helper(opt: Any, out: _Resolved) -> str:
    """Each whole parameter's fp32 slice, cut by its fragment map here, against what
    DeepSpeed's own ``safe_get_full_fp32_param`` assembles for it."""
    import torch
    from deepspeed.utils import safe_get_full_fp32_param

    cut = {
        f.name: (i, f)
        for i, flat in enumerate(opt.single_partition_of_fp32_groups)
        for f in out.fragments.get(id(flat), [])
    }
    bad, n = [], 0
    for name, lp in out.params.items():
        if name not in cut or "[" in name:
            continue
        i, f = cut[name]
        mine = opt.single_partition_of_fp32_groups[i].reshape(-1).narrow(0, f.start, f.numel)
        n += 1
        if not torch.equal(mine.view(f.shape), safe_get_full_fp32_param(lp)):
            bad.append(name)
    if bad:
        return f"safe_get_full_fp32_param disagrees for {len(bad)} of {n}: {', '.join(bad[:5])}"
    return f"safe_get_full_fp32_param agrees for all {n} whole parameters"


def attach_deepspeed(
    out_dir: str | os.PathLike[str], engine: Any, *, outputs: tuple[str, ...] = ()
) -> BoundaryCapture:
    return BoundaryCapture(
        out_dir,
        "deepspeed",
        engine.module,
        resolve_deepspeed(engine),
        type(engine.optimizer).__name__,
        outputs,
        float(engine.gradient_clipping()),
    )


# -- plain torch -------------------------------------------------------------------------------
def attach_torch(
    out_dir: str | os.PathLike[str],
    model: Any,
    optimizer: Any,
    masters: dict[str, Any],
    *,
    outputs: tuple[str, ...] = (),
    clip: float = 0.0,
) -> BoundaryCapture:
    """A reference trainer written in plain torch: ``optimizer`` (a ``torch.optim``
    optimizer) updates ``masters``, one fp32 tensor per model parameter by its name, which
    the trainer copies into the model after each step."""
    named = dict(model.named_parameters())
    missing = sorted(set(masters) - set(named))
    if missing:
        from ..errors import InputError

        raise InputError(f"masters name no parameter of the model: {', '.join(missing[:5])}")
    group_of = {id(p): g for g, grp in enumerate(optimizer.param_groups) for p in grp["params"]}
    out = _Resolved(inners=[optimizer], check="masters given by name, one per parameter")
    for name, m in masters.items():
        out.sites.append(
            TensorSite(
                name=name,
                shape=list(m.shape),
                dtype=str(named[name].dtype).removeprefix("torch."),
                master=f"masters[{name!r}] ({str(m.dtype).removeprefix('torch.')})",
                grad=f"masters[{name!r}].grad",
                group=group_of.get(id(m), -1),
            )
        )
        out.fragments[id(m)] = [_Fragment(name, 0, m.numel(), tuple(m.shape))]
        out.params[name] = named[name]
    return BoundaryCapture(
        out_dir, "torch", model, out, type(optimizer).__name__, outputs, float(clip)
    )

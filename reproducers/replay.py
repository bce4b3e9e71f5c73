"""Controlled replay of one traced op on its captured inputs, under one changed policy.

This is how the workflow shows causality rather than correlation: given the equal inputs of
the first divergent event, rerun the op N times with one knob changed (deterministic
algorithms on/off, a side stream, another dtype, another device) and say whether the
outputs reproduce the recorded ones and whether they repeat among themselves.

Inputs come from a tensor dump written by the tracer (``{"name", "inputs", "outputs"}``,
inputs being the op's tensor arguments in order) or from a full call record
(``{"op", "args", "kwargs", "outputs"}``). A tracer dump holds only tensors: the op's
non-tensor arguments (``dim`` of ``index_add``) are filled from their schema defaults or
from ``nontensor_args``; a missing one is an InputError naming it, never a guess.

Comparison is on bytes: each run's outputs are compared with the recorded output tensors
bit for bit, and digested with sha256 over the raw bytes. When the trace's own digests are
given (``recorded_digests``) they are checked with ``triage_agent.fingerprint.digest``,
the digest the tracer wrote, so a replay can also be matched against a trace without a dump.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from triage_agent.errors import InputError
from triage_agent.evidence_data import ReplayData
from triage_agent.ledger import Ledger
from triage_agent.paths import contained
from triage_agent.records import Evidence, EvidenceKind, EvidenceResult

DIGEST_ALGO = "sha256 over raw bytes (tensor.view(uint8))"


class ReplayPolicy(BaseModel):
    """The one thing changed for the replay; None leaves a knob as the process has it."""

    deterministic: bool | None = Field(
        default=None, description="torch.use_deterministic_algorithms"
    )
    stream: Literal["default", "side"] = Field(
        default="default", description="CUDA stream to run on"
    )
    dtype: str | None = Field(default=None, description="cast floating inputs to this dtype")
    device: str | None = Field(default=None, description="move inputs to this device (cpu, cuda)")

    @field_validator("device")
    @classmethod
    def _a_device(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"cpu|cuda(:\d+)?", v):
            raise ValueError(f"device must be cpu, cuda or cuda:N, got {v!r}")
        return v

    def changed(self) -> list[str]:
        return [k for k, v in self.model_dump().items() if v not in (None, "default")]


class ReplayResult(BaseModel):
    op: str
    policy: ReplayPolicy
    repeats: int
    device: str
    digest_algo: str = DIGEST_ALGO
    runs: list[list[str | None]] = Field(description="per run, per output: sha256 of raw bytes")
    recorded: list[str | None] = Field(
        default_factory=list, description="sha256 of the recorded outputs"
    )
    distinct_runs: int
    repeatable: bool = Field(description="every run produced the same bytes")
    runs_matching_recorded: int | None = Field(default=None, description="None: nothing recorded")
    trace_digest_match: list[bool] | None = Field(
        default=None, description="per run: outputs equal the trace's recorded digests"
    )
    notes: list[str] = Field(default_factory=list)

    @property
    def reproduces_recorded(self) -> bool | None:
        if self.runs_matching_recorded is None:
            return None
        return self.runs_matching_recorded == self.repeats


def sha_bytes(t: Any) -> str | None:
    import torch

    if not isinstance(t, torch.Tensor):
        return None
    flat = t.detach().contiguous().cpu().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    return hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


def resolve_op(name: str) -> Any:
    """'aten::index_add_', 'aten::add.Tensor', 'aten.mm.default', 'torch.matmul' -> callable."""
    import torch

    if not name or name.startswith("-") or len(name) > 200:
        raise InputError(f"invalid op name {name!r}")
    if name.startswith("torch.") and "::" not in name:
        obj: Any = torch
        for part in name.split(".")[1:]:
            if not part.isidentifier() or part.startswith("_"):
                raise InputError(f"invalid op name {name!r}")
            obj = getattr(obj, part, None)
            if obj is None:
                raise InputError(f"no op {name!r} in torch")
        return obj
    ns, sep, rest = name.partition("::")
    if not sep:
        ns, _, rest = name.partition(".")
    base, _, overload = rest.partition(".")
    packet = (
        getattr(getattr(torch.ops, ns, None), base, None)
        if ns.isidentifier() and base.isidentifier()
        else None
    )
    if packet is None:
        raise InputError(f"no ATen op {name!r}")
    overload = overload or "default"
    if overload not in packet.overloads():
        raise InputError(
            f"op {ns}::{base} has no overload {overload!r}; it has {', '.join(packet.overloads())}"
        )
    return getattr(packet, overload)


def _is_tensor_arg(arg: Any) -> bool:
    return "Tensor" in str(arg.type)


def build_call(
    op: Any, tensors: list[Any], nontensor_args: dict[str, Any] | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """Rebuild (args, kwargs) of an ATen overload from its tensor inputs in schema order."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        raise InputError(
            "only ATen ops (aten::name[.overload]) can be rebuilt from a tensor-only dump"
        )
    extra = dict(nontensor_args or {})
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    it = iter(tensors)
    missing = []
    for arg in schema.arguments:
        if arg.name in extra:
            value = extra.pop(arg.name)
        elif _is_tensor_arg(arg) and "[]" in str(arg.type):
            value = list(it)
        elif _is_tensor_arg(arg) and not str(arg.type).endswith("?"):
            value = next(it, None)
            if value is None:
                raise InputError(
                    f"the dump has too few tensors for {schema.name} (argument {arg.name})"
                )
        elif arg.has_default_value():
            continue
        else:
            missing.append(arg.name)
            continue
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    if missing:
        raise InputError(
            f"the dump holds only tensors; give {schema.name}'s non-tensor argument(s) "
            f"{', '.join(missing)} as nontensor_args"
        )
    if extra:
        raise InputError(f"{schema.name} has no argument(s) {', '.join(sorted(extra))}")
    if next(it, None) is not None:
        raise InputError(f"the dump has more tensors than {schema.name} takes")
    return args, kwargs


@contextlib.contextmanager
def _policy(policy: ReplayPolicy, device: str) -> Iterator[None]:
    import torch

    before = torch.are_deterministic_algorithms_enabled()
    if policy.deterministic is not None:
        torch.use_deterministic_algorithms(policy.deterministic)
    try:
        if policy.stream == "side":
            if not device.startswith("cuda"):
                raise InputError("policy stream='side' needs a CUDA device")
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                yield
            torch.cuda.current_stream().wait_stream(side)
        else:
            yield
    finally:
        torch.use_deterministic_algorithms(before)


def _prepare(x: Any, policy: ReplayPolicy) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        y = x.detach().clone()
        if policy.device:
            y = y.to(policy.device)
        if policy.dtype and y.is_floating_point():
            y = y.to(getattr(torch, policy.dtype))
        return y
    if isinstance(x, list | tuple):
        return type(x)(_prepare(v, policy) for v in x)
    if isinstance(x, dict):
        return {k: _prepare(v, policy) for k, v in x.items()}
    return x


def _outputs(out: Any) -> list[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, list | tuple):
        return [t for t in out if isinstance(t, torch.Tensor)]
    return []


def replay_op(
    op: str,
    args: list[Any],
    kwargs: dict[str, Any] | None = None,
    recorded_outputs: list[Any] | None = None,
    recorded_digests: list[dict[str, Any] | None] | None = None,
    repeats: int = 5,
    policy: ReplayPolicy | None = None,
) -> ReplayResult:
    """Run ``op(*args, **kwargs)`` ``repeats`` times on fresh copies of the inputs.

    In-place ops mutate their inputs, so every run gets new clones; the originals are never
    touched. ``recorded_outputs`` are tensors (compared bytewise); ``recorded_digests`` are
    the trace's TensorDigest dicts (compared with the tracer's own digest).
    """
    import torch

    if repeats < 1 or repeats > 10_000:
        raise InputError(f"repeats must be between 1 and 10000, got {repeats}")
    policy = policy or ReplayPolicy()
    if policy.dtype is not None and not isinstance(getattr(torch, policy.dtype, None), torch.dtype):
        raise InputError(f"unknown dtype {policy.dtype!r}")
    if policy.device and policy.device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError("policy device 'cuda' but no CUDA device is available")
    fn = resolve_op(op)
    first = next(
        (t for t in _outputs(args) + _outputs(list((kwargs or {}).values())) if t is not None), None
    )
    device = policy.device or (str(first.device) if first is not None else "cpu")
    recorded = [sha_bytes(t) for t in recorded_outputs] if recorded_outputs is not None else []
    runs: list[list[str | None]] = []
    trace_match: list[bool] | None = [] if recorded_digests is not None else None
    for _ in range(repeats):
        a, kw = _prepare(list(args), policy), _prepare(dict(kwargs or {}), policy)
        with _policy(policy, device):
            out = fn(*a, **kw)
        outs = _outputs(out)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        runs.append([sha_bytes(t) for t in outs])
        if trace_match is not None:
            trace_match.append(_matches_trace(outs, recorded_digests or []))
    notes = []
    if policy.dtype or policy.device:
        notes.append(
            "inputs were cast/moved by the policy: the recorded bytes are not expected to match"
        )
    matching = None
    if recorded_outputs is not None:
        matching = sum(1 for r in runs if r == recorded)
    return ReplayResult(
        op=op,
        policy=policy,
        repeats=repeats,
        device=device,
        runs=runs,
        recorded=recorded,
        distinct_runs=len({tuple(r) for r in runs}),
        repeatable=len({tuple(r) for r in runs}) == 1,
        runs_matching_recorded=matching,
        trace_digest_match=trace_match,
        notes=notes,
    )


def _matches_trace(outs: list[Any], recorded: list[dict[str, Any] | None]) -> bool:
    from triage_agent.fingerprint.digest import digest_now

    if len(outs) != len(recorded):
        return False
    for t, rec in zip(outs, recorded, strict=True):
        if rec is None:
            continue
        mode = "both" if rec.get("order") else "xor"
        mine = digest_now(t, mode)
        if mine is None or mine.get("digest") != rec.get("digest"):
            return False
        if rec.get("order") and mine.get("order") != rec.get("order"):
            return False
    return True


class DumpedCall(BaseModel):
    op: str
    args: list[Any]
    kwargs: dict[str, Any] = Field(default_factory=dict)
    outputs: list[Any] | None = None
    settings: dict[str, str] = Field(
        default_factory=dict, description="the global numeric settings the op ran under (repr)"
    )

    model_config = {"arbitrary_types_allowed": True}


def load_dump(
    path: str | os.PathLike[str], nontensor_args: dict[str, Any] | None = None
) -> DumpedCall:
    """Read a tracer dump or a full call record (``torch.load`` with ``weights_only=True``)."""
    import torch

    p = Path(path)
    if not p.is_file():
        raise InputError(f"dump {p} does not exist")
    try:
        raw = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad input file
        raise InputError(
            f"dump {p} is not a readable tensor dump: {type(exc).__name__}: {str(exc)[:200]}"
        ) from None
    if not isinstance(raw, dict):
        raise InputError(f"dump {p} holds a {type(raw).__name__}, expected a dict")
    if "args" in raw and "op" in raw:
        if nontensor_args:
            # the whole call was recorded: an --arg would be silently unused, so say so
            raise InputError(
                f"dump {p} holds the whole call of {raw['op']}, non-tensor arguments "
                f"included: drop --arg {', '.join(sorted(nontensor_args))}"
            )
        args, kwargs = list(raw["args"]), dict(raw.get("kwargs") or {})
        device = str(raw.get("device", "cpu"))
        if device.startswith("cuda") and torch.cuda.is_available():
            # Replay where the op ran: an atomic CUDA kernel is deterministic on the CPU.
            def to_dev(x: Any) -> Any:
                if isinstance(x, torch.Tensor):
                    return x.to(device)
                if isinstance(x, list):
                    return [to_dev(v) for v in x]
                return x

            args, kwargs = to_dev(args), {k: to_dev(v) for k, v in kwargs.items()}
        return DumpedCall(
            op=raw["op"],
            args=args,
            kwargs=kwargs,
            outputs=raw.get("outputs"),
            settings=dict(raw.get("settings") or {}),
        )
    if "name" in raw and "inputs" in raw:
        name = str(raw["name"])
        if raw["inputs"] is None:
            raise InputError(f"dump {p} ({name}) holds no inputs")
        args, kwargs = build_call(resolve_op(name), list(raw["inputs"]), nontensor_args)
        return DumpedCall(
            op=name,
            args=args,
            kwargs=kwargs,
            outputs=raw.get("outputs"),
            settings=dict(raw.get("settings") or {}),
        )
    raise InputError(
        f"dump {p} has keys {sorted(raw)}: expected name/inputs/outputs or op/args/kwargs"
    )


@contextlib.contextmanager
def _under(settings: dict[str, str]) -> Iterator[dict[str, str]]:
    """This process under the recorded settings that differ from its own and can be set
    (yields those), put back as they were afterwards."""
    import ast

    from triage_agent.settings import SETTINGS, read_settings, settable

    mine = read_settings()
    put = {k: v for k, v in settings.items() if settable(k) and mine.get(k) != v}
    done: dict[str, str] = {}
    try:
        for name, text in put.items():
            try:
                SETTINGS[name][1](ast.literal_eval(text))  # type: ignore[misc]
                done[name] = text
            except (ValueError, SyntaxError, RuntimeError, TypeError):
                continue  # a setting this build or device cannot take is replayed as is
        yield done
    finally:
        for name in done:
            with contextlib.suppress(Exception):
                SETTINGS[name][1](ast.literal_eval(mine[name]))  # type: ignore[misc]


def replay_dump(
    dump: str | os.PathLike[str],
    workspace: str | os.PathLike[str],
    repeats: int = 5,
    policy: ReplayPolicy | None = None,
    hypotheses: list[str] | None = None,
    nontensor_args: dict[str, Any] | None = None,
    roots: list[str | os.PathLike[str]] | None = None,
    record: bool = True,
) -> Evidence:
    """Replay a dumped op and return (and by default record) Evidence of kind ``replay``.

    ``result`` is ``observed``: a replay is a measurement; which hypothesis it supports
    depends on the policy changed, and the workflow (or a person) states that.
    """
    changed = (policy or ReplayPolicy()).changed()
    if len(changed) > 1:
        # One changed policy at a time, or the replay cannot say which knob mattered.
        raise InputError(f"change one policy at a time, not {len(changed)}: {', '.join(changed)}")
    ledger = Ledger(workspace)
    path = contained(dump, roots or [ledger.workspace, Path.cwd()])
    call = load_dump(path, nontensor_args)
    t0 = time.monotonic()
    with _under(call.settings) as put:
        res = replay_op(call.op, call.args, call.kwargs, call.outputs, None, repeats, policy)
    duration = round(time.monotonic() - t0, 3)
    changed = ", ".join(res.policy.changed()) or "none"
    parts = [f"replayed {res.op} x{res.repeats} on {res.device} (policy changed: {changed})"]
    if put:
        # the replaying process computes under the run's settings, not its own
        parts.append("under the run's settings " + ", ".join(f"{k}={v}" for k, v in put.items()))
    parts.append(
        "repeatable" if res.repeatable else f"NOT repeatable: {res.distinct_runs} distinct outputs"
    )
    if res.runs_matching_recorded is not None:
        parts.append(
            f"{res.runs_matching_recorded}/{res.repeats} runs reproduce the recorded bytes"
        )
    ev = Evidence(
        hypotheses=list(hypotheses or []),
        kind=EvidenceKind.replay,
        result=EvidenceResult.observed,
        summary="; ".join(parts),
        data=ReplayData(
            **res.model_dump(mode="json"),
            reproduces_recorded=res.reproduces_recorded,
            dump=str(path),
        ),
        artifacts=[ledger.artifact(path, role="dump")],
        duration_s=duration,
    )
    if record:
        ledger.add_evidence(ev)
    return ev

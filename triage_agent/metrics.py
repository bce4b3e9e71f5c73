"""Metric fingerprints: the exact bits of loss, grad norm, lr, ... per step and rank.

Printed loss is not evidence; these files are. Usage inside a training loop::

    log = MetricLog("runs/a", rank=dist.get_rank(), resumed_from=None)
    log.log(step, loss=loss, grad_norm=engine.get_global_grad_norm(), lr=lr)

One file per rank (``metrics_rank{R}.jsonl``), appended to by every process of the run:
each process writes a ``session`` line first (pid, and the step it resumed from, if any),
then one ``step`` line per step, flushed at once. A value keeps its dtype and raw bits:
a float32 tensor is stored as its 32-bit pattern, a Python float as its 64-bit pattern.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import struct
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from .errors import InputError
from .records import utcnow

_INT_VIEW = {"float64": ("<d", "<Q"), "float32": ("<f", "<I"), "float16": ("<e", "<H")}


METRIC_DTYPES = ("float64", "float32", "float16", "bfloat16", "int", "bool") + tuple(
    f"{s}int{w}" for s in ("", "u") for w in (8, 16, 32, 64)
)


class MetricValue(BaseModel):
    dtype: str
    bits: str = Field(description="raw bit pattern, hex, of the value in its own dtype")
    value: float | None = Field(default=None, description="for people only; never compared")

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, v: str) -> str:
        if v not in METRIC_DTYPES:
            raise ValueError(f"unknown dtype {v!r} (one of {', '.join(METRIC_DTYPES[:4])}, ...)")
        return v

    @field_validator("bits")
    @classmethod
    def _hex_bits(cls, v: str) -> str:
        try:
            int(v, 16)
        except ValueError:
            raise ValueError(f"bits {v!r} is not a hexadecimal bit pattern") from None
        return v

    def as_float(self) -> float:
        return self.value if self.value is not None else math.nan


class SessionLine(BaseModel):
    type: Literal["session"] = "session"
    rank: int
    pid: int
    host: str
    ts: str
    run_id: str | None = None
    resumed_from: int | None = None


class StepLine(BaseModel):
    type: Literal["step"] = "step"
    step: int
    rank: int
    metrics: dict[str, MetricValue]


def fingerprint(value: Any) -> MetricValue:
    """Exact bits of a scalar: a 0-d/1-element torch tensor keeps its own dtype."""
    if hasattr(value, "detach") and hasattr(value, "dtype"):
        import torch

        t = value.detach().reshape(-1)
        if t.numel() != 1:
            raise InputError(
                f"metric tensors must hold one element, got shape {tuple(value.shape)}"
            )
        t = t.cpu().contiguous()
        bits_dtype = {
            torch.float64: torch.int64,
            torch.float32: torch.int32,
            torch.float16: torch.int16,
            torch.bfloat16: torch.int16,
        }.get(t.dtype)
        dtype = str(t.dtype).removeprefix("torch.")
        if bits_dtype is None:
            return MetricValue(dtype=dtype, bits=hex(int(t.item())), value=float(t.item()))
        raw = int(t.view(bits_dtype).item())
        width = {torch.int64: 64, torch.int32: 32, torch.int16: 16}[bits_dtype]
        raw &= (1 << width) - 1
        return MetricValue(
            dtype=dtype, bits=f"0x{raw:0{width // 4}x}", value=float(t.float().item())
        )
    if isinstance(value, int):  # bool is an int
        return MetricValue(dtype="int", bits=hex(int(value)), value=float(value))
    if isinstance(value, float):
        raw = struct.unpack("<Q", struct.pack("<d", value))[0]
        return MetricValue(dtype="float64", bits=f"0x{raw:016x}", value=value)
    raise InputError(f"cannot fingerprint metric of type {type(value).__name__}")


class MetricLog:
    """Appends exact metric bits for one rank. Cheap: one small line per step, flushed."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        rank: int = 0,
        resumed_from: int | None = None,
        run_id: str | None = None,
    ):
        d = Path(path)
        d.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.file = d / f"metrics_rank{rank}.jsonl"
        self._fh = open(self.file, "a", buffering=1)
        session = SessionLine(
            rank=rank,
            pid=os.getpid(),
            host=socket.gethostname(),
            ts=utcnow(),
            run_id=run_id,
            resumed_from=resumed_from,
        )
        self._write(session)

    def _write(self, rec: BaseModel) -> None:
        self._fh.write(rec.model_dump_json(exclude_none=True) + "\n")
        self._fh.flush()

    def log(self, step: int, **metrics: Any) -> None:
        fps = {k: fingerprint(v) for k, v in metrics.items() if v is not None}
        self._write(StepLine(step=step, rank=self.rank, metrics=fps))

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> MetricLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RankMetrics(BaseModel):
    rank: int
    steps: dict[int, dict[str, MetricValue]] = Field(default_factory=dict)
    sessions: list[SessionLine] = Field(default_factory=list)
    relogged_steps: list[int] = Field(default_factory=list)

    @property
    def resumes(self) -> list[int]:
        return [s.resumed_from for s in self.sessions if s.resumed_from is not None]


class MetricRun(BaseModel):
    source: str
    ranks: dict[int, RankMetrics]

    @property
    def resumes(self) -> list[int]:
        return sorted({r for rm in self.ranks.values() for r in rm.resumes})


def _metric_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(path.glob("metrics_rank*.jsonl"))
        if files:
            return files
        raise InputError(f"{path} holds no metrics_rank*.jsonl files: is it a metrics directory?")
    raise InputError(f"metrics path {path} does not exist")


def load_metrics(path: str | os.PathLike[str]) -> MetricRun:
    """Read a metrics file or directory. A later value for a re-logged step wins (and is noted)."""
    p = Path(path)
    ranks: dict[int, RankMetrics] = {}
    for f in _metric_files(p):
        named = re.fullmatch(r"metrics_rank(\d+)\.jsonl", f.name)
        file_rank = int(named.group(1)) if named else None
        try:
            lines = f.read_bytes().split(b"\n")
        except OSError as exc:
            raise InputError(f"cannot read metrics file {f}: {exc.strerror or exc}") from None
        for i, raw in enumerate(lines, start=1):
            # Only the final segment, the one without a newline after it, can be a write
            # cut short by a crash; a bad line that was terminated is corruption.
            torn = i == len(lines)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if torn:
                    continue
                raise InputError(
                    f"{f}:{i}: not UTF-8 text (byte {exc.start} of the line)"
                ) from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if "\\ud" in line or "\\uD" in line:  # a lone surrogate escape is not text
                    json.dumps(obj, ensure_ascii=False).encode("utf-8")
                if not isinstance(obj, dict):
                    raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
                kind = obj.get("type")
                if kind == "session":
                    s = SessionLine.model_validate(obj)
                    if file_rank is not None and s.rank != file_rank:
                        raise InputError(
                            f"{f}:{i}: the line says rank {s.rank} but the file name says "
                            f"{file_rank}: each rank writes its own file"
                        )
                    ranks.setdefault(s.rank, RankMetrics(rank=s.rank)).sessions.append(s)
                elif kind == "step":
                    st = StepLine.model_validate(obj)
                    if file_rank is not None and st.rank != file_rank:
                        raise InputError(
                            f"{f}:{i}: the line says rank {st.rank} but the file name says "
                            f"{file_rank}: each rank writes its own file"
                        )
                    rm = ranks.setdefault(st.rank, RankMetrics(rank=st.rank))
                    if st.step in rm.steps:
                        rm.relogged_steps.append(st.step)
                    rm.steps[st.step] = st.metrics
                else:
                    raise ValueError(f"unknown record type {kind!r}")
            except (ValueError, TypeError, RecursionError) as exc:
                if torn:
                    # a torn last line from a crashed rank: keep everything before it
                    continue
                if isinstance(exc, ValidationError):
                    err = exc.errors()[0]
                    where = ".".join(str(x) for x in err["loc"])
                    msg = f"{where}: {err['msg']}"
                else:
                    msg = str(exc).splitlines()[0]
                raise InputError(f"{f}:{i}: malformed metrics line: {msg}") from None
    if not ranks:
        raise InputError(f"{p}: no metric records")
    return MetricRun(source=str(p), ranks=ranks)


class MetricMismatch(BaseModel):
    step: int
    rank: int
    metric: str
    a: MetricValue | None
    b: MetricValue | None


class MetricDiff(BaseModel):
    first_step: int | None = Field(description="first step whose bits differ on any rank")
    ranks_only_in_a: list[int] = Field(default_factory=list)
    ranks_only_in_b: list[int] = Field(default_factory=list)
    mismatches: list[MetricMismatch] = Field(description="every differing metric at first_step")
    common_steps: list[int]
    last_equal_step: int | None
    only_in_a: list[int] = Field(default_factory=list)
    only_in_b: list[int] = Field(default_factory=list)
    resumes_a: list[int] = Field(default_factory=list)
    resumes_b: list[int] = Field(default_factory=list)
    ranks: list[int] = Field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Both runs hold the same ranks and the same steps: 'equal' then covers everything."""
        return not (
            self.ranks_only_in_a or self.ranks_only_in_b or self.only_in_a or self.only_in_b
        )

    def gaps(self) -> str:
        """What one run has and the other lacks, in one line ('' when complete)."""
        parts = [
            f"{label} {v}"
            for label, v in (
                ("ranks only in A:", self.ranks_only_in_a),
                ("ranks only in B:", self.ranks_only_in_b),
                ("steps only in A:", _span(self.only_in_a)),
                ("steps only in B:", _span(self.only_in_b)),
            )
            if v
        ]
        return "; ".join(parts)


def _span(steps: list[int]) -> str:
    if not steps:
        return ""
    if len(steps) > 6 and steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]}..{steps[-1]}"
    return str(steps if len(steps) <= 12 else [*steps[:12], "..."])


def diff_metrics(a: MetricRun, b: MetricRun) -> MetricDiff:
    ranks = sorted(set(a.ranks) & set(b.ranks))
    if not ranks:
        raise InputError(f"runs share no rank: A has {sorted(a.ranks)}, B has {sorted(b.ranks)}")
    steps_a = set().union(*(a.ranks[r].steps for r in ranks))
    steps_b = set().union(*(b.ranks[r].steps for r in ranks))
    common = sorted(steps_a & steps_b)
    first: int | None = None
    mism: list[MetricMismatch] = []
    last_equal: int | None = None
    for step in common:
        here: list[MetricMismatch] = []
        for r in ranks:
            ma = a.ranks[r].steps.get(step, {})
            mb = b.ranks[r].steps.get(step, {})
            for name in sorted(set(ma) | set(mb)):
                va, vb = ma.get(name), mb.get(name)
                if va is None or vb is None or (va.dtype, va.bits) != (vb.dtype, vb.bits):
                    here.append(MetricMismatch(step=step, rank=r, metric=name, a=va, b=vb))
        if here:
            first, mism = step, here
            break
        last_equal = step
    return MetricDiff(
        first_step=first,
        mismatches=mism,
        common_steps=common,
        last_equal_step=last_equal,
        only_in_a=sorted(steps_a - steps_b),
        only_in_b=sorted(steps_b - steps_a),
        resumes_a=a.resumes,
        resumes_b=b.resumes,
        ranks=ranks,
        ranks_only_in_a=sorted(set(a.ranks) - set(b.ranks)),
        ranks_only_in_b=sorted(set(b.ranks) - set(a.ranks)),
    )


def ulp_distance(a: MetricValue, b: MetricValue) -> float:
    """Distance in units in the last place between two same-dtype floats (inf if not comparable)."""
    if a.dtype != b.dtype or a.dtype not in ("float64", "float32", "float16", "bfloat16"):
        return math.inf
    width = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16}[a.dtype]
    sign = 1 << (width - 1)

    def ordered(bits: str) -> int:
        x = int(bits, 16)
        return sign - (x & (sign - 1)) if x & sign else sign + x

    return float(abs(ordered(a.bits) - ordered(b.bits)))

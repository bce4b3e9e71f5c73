"""Synthetic native traces: deterministic event streams for tests, benchmarks and docs.

Why: the comparator has to be exercised on streams whose ground truth is known (where the
divergence was planted, which events were inserted or deleted) long before a real capture
exists, and at sizes (a million events) no test run produces. The data flow is a chain: each
event's input is the previous event's output, so a planted divergence makes every later
event a receiver, as it would be in a real model. Digests are stand-ins (blake2b of the
chain), not digests of tensors.

Limits: one data-flow chain per rank; no tensor dumps; a writer, not a tracer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from ..trace_format import TRACE_SCHEMA_VERSION, trace_filename

_OPS = ("aten::mm", "aten::add", "aten::gelu", "aten::view", "aten::mul", "aten::sum")
_SCOPES = tuple(f"layers.{i}.{part}" for i in range(4) for part in ("attn", "mlp"))


class SynthSpec(BaseModel):
    """What to plant in run B relative to run A (positions are indices into A's stream)."""

    events: int = 1000
    steps: int = 2
    rank: int = 0
    world_size: int = 1
    diverge_at: int | None = Field(default=None, description="B's output differs here")
    insert_at: list[int] = Field(default_factory=list, description="B has an extra op here")
    delete_at: list[int] = Field(default_factory=list, description="B lacks A's event here")
    update_at: list[int] = Field(
        default_factory=list,
        description="B executes an extra optimizer step here that rewrites the chain's value "
        "(a stray update): every later event of B receives it",
    )
    receive_at: int | None = Field(
        default=None,
        description="B's input differs here, with no origin on this rank: a difference that "
        "arrives from outside the capture (another rank's collective); every later event of B "
        "receives it",
    )
    run_id: str = "synthetic"


def _h(*parts: str) -> str:
    return hashlib.blake2b("|".join(parts).encode(), digest_size=8).hexdigest()


# json.dumps of an event, as a template: the writer must produce millions of lines a minute
# for the scale benchmark (json.dumps costs ~19 us a line); a test holds the two equal.
_EVENT = (
    '{"type": "event", "seq": %d, "step": %d, "kind": "%s", "name": "%s", "scope": "%s", '
    '"call": %d, "phase": "%s", "caller": %s, "inputs": [%s], "outputs": [%s], "dump": null, '
    '"meta": {}}'
)
_DIGEST = '{"shape": [4, 4], "dtype": "float32", "numel": 16, "digest": "%s", "order": null}'


def header_line(spec: SynthSpec, run_id: str) -> str:
    return json.dumps(
        {
            "type": "header",
            "schema_version": TRACE_SCHEMA_VERSION,
            "run_id": run_id,
            "rank": spec.rank,
            "world_size": spec.world_size,
            "coords": {"dp": spec.rank},
            "versions": {},
            "config": {"level": "ops"},
            "created": "2026-01-01T00:00:00+00:00",
            "host": "synth",
            "argv": [],
        }
    )


def event_lines(spec: SynthSpec, variant: str) -> Iterator[str]:
    """Lines of one run: variant 'a' is the reference, 'b' carries the planted changes."""
    per_step = max(1, spec.events // spec.steps)
    b = variant == "b"
    inserts = set(spec.insert_at) if b else set()
    updates = set(spec.update_at) if b else set()
    planted_deletes = set(spec.delete_at)
    deletes = planted_deletes if b else set()
    calls: dict[tuple[int, str, str], int] = {}
    prev = _h("input", str(spec.rank))
    seq = 0
    step = 0
    in_step = 0
    for i in range(spec.events):
        cur_step = min(i // per_step, spec.steps - 1)
        if cur_step != step:
            yield json.dumps({"type": "step_end", "step": step, "events": in_step})
            step, in_step = cur_step, 0
        scope = _SCOPES[(i // 7) % len(_SCOPES)]
        if b and i == spec.receive_at:
            prev = _h("received", prev)
        todo = []
        if i in updates:
            todo.append(("SGD", "update"))
        if i in inserts:
            todo.append(("aten::clone", "extra"))
        # A deleted event is a side op in both runs (its output feeds nothing), so deleting
        # it from B changes the structure but not the data flow.
        if i in planted_deletes:
            if i not in deletes:
                todo.append(("aten::mean", "side"))
        else:
            todo.append((_OPS[i % len(_OPS)], "main"))
        for name, role in todo:
            key = (step, scope, name)
            call = calls.get(key, 0)
            calls[key] = call + 1
            out = prev if role == "extra" else _h(name, prev)
            if role == "main" and b and i == spec.diverge_at:
                out = _h("diverged", out)
            update = role == "update"
            yield _EVENT % (
                seq,
                step,
                "optimizer" if update else "op",
                name,
                scope,
                call,
                "optimizer" if update else "forward",
                f'"train.py:{100 + i}"' if update else "null",
                _DIGEST % prev,
                _DIGEST % out,
            )
            seq += 1
            in_step += 1
            if role in ("main", "update"):
                prev = out
    yield json.dumps({"type": "step_end", "step": step, "events": in_step})
    yield json.dumps({"type": "end", "status": "ok", "steps": list(range(spec.steps)), "note": ""})


def write_pair(spec: SynthSpec, root: Path) -> tuple[Path, Path]:
    """Write run A and run B trace directories under ``root``; returns (dir_a, dir_b)."""
    dirs = []
    for variant in ("a", "b"):
        d = root / f"run_{variant}"
        d.mkdir(parents=True, exist_ok=True)
        with open(d / trace_filename(spec.rank), "w") as fh:
            fh.write(header_line(spec, f"{spec.run_id}-{variant}") + "\n")
            for line in event_lines(spec, variant):
                fh.write(line + "\n")
        dirs.append(d)
    return dirs[0], dirs[1]

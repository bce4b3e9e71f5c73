"""Builders of small native traces for the comparison tests."""

from __future__ import annotations

import json
from pathlib import Path

from triage_agent.trace_format import (
    TRACE_SCHEMA_VERSION,
    TraceEnd,
    TraceEvent,
    TraceHeader,
    trace_filename,
)


def dg(d: str, dtype: str = "float32") -> dict:
    return {"shape": [2], "dtype": dtype, "numel": 2, "digest": d, "order": None}


def ev(seq, name, ins, outs, step=0, scope="m", call=None, kind="op", **kw) -> dict:
    return {
        "seq": seq,
        "step": step,
        "kind": kind,
        "name": name,
        "scope": scope,
        "call": call if call is not None else 0,
        "phase": "forward",
        "inputs": [dg(x) for x in ins],
        "outputs": [dg(x) for x in outs],
        **kw,
    }


def write_trace(
    d: Path,
    events: list[dict],
    rank: int = 0,
    world: int = 1,
    end: bool = True,
    compact: bool = False,
    version: int = TRACE_SCHEMA_VERSION,
) -> Path:
    """Write one rank file; calls are recounted per (step, scope, name) unless given."""
    d.mkdir(parents=True, exist_ok=True)
    counts: dict = {}
    path = d / trace_filename(rank)
    hdr = TraceHeader(run_id=d.name, rank=rank, world_size=world, created="t").model_dump()
    hdr["schema_version"] = version
    with open(path, "w") as fh:
        fh.write(json.dumps(hdr) + "\n")
        for e in events:
            key = (e["step"], e["scope"], e["name"])
            e = dict(e, call=counts.get(key, 0))
            counts[key] = e["call"] + 1
            m = TraceEvent.model_validate(e)
            fh.write((m.model_dump_json() if compact else json.dumps(m.model_dump())) + "\n")
        if end:
            fh.write(TraceEnd().model_dump_json() + "\n")
    return path


def chain(n: int, diverge: int | None = None, names=("mm", "add", "gelu")) -> list[dict]:
    """n events, each consuming the previous output; ``diverge``: that event's output differs."""
    out, prev = [], "x0"
    for i in range(n):
        o = f"o{i}" if i != diverge else f"o{i}!"
        if diverge is not None and i > diverge:
            o += "~"
        out.append(ev(i, f"aten::{names[i % len(names)]}", [prev], [o], scope=f"l{i // 4}"))
        prev = o
    return out


def write_receiver_only_pair(root: Path) -> tuple[Path, Path]:
    """Two one-rank traces whose first event already receives different inputs: no origin
    lies on the traced events, so the comparison says what to widen."""
    write_trace(root / "a", chain(6))
    eb = chain(6)
    eb[0] = dict(eb[0], inputs=[dg("x0-other")])
    for e in eb:
        e["outputs"] = [dg(e["outputs"][0]["digest"] + "'")]
    for k in range(1, 6):
        eb[k]["inputs"] = eb[k - 1]["outputs"]
    write_trace(root / "b", eb)
    return root / "a", root / "b"


def run_compare_cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """``triage compare ARGS`` in this process: its exit code, stdout and stderr."""
    import sys

    import pytest

    from triage_agent.cli.app import main

    monkeypatch.setattr(sys, "argv", ["triage", "compare", *map(str, args)])
    with pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err

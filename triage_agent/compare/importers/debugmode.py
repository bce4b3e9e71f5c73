"""PyTorch DebugMode hash logs: the text of ``debug_mode.debug_string()`` recorded under
``DebugMode.log_tensor_hashes(hash_inputs=...)``.

Each call is one line, indented by call depth::

    aten::addmm(t: f32[4], t: f32[4, 4], t: f32[4, 4])  ->  t: f32[4, 4]  # {'input_hash': ((1.07, 13.9, 4.08), {}), 'hash': 6.99}

Module lines (``[nn.Mod] name``, from ``record_nn_module=True``) open a scope for the
deeper-indented calls below them. Hashes are Python literals (floats for the ``norm``
hash, ints for ``hash_tensor``); floats are compared by their exact bits. Calls without a
hash annotation (``empty*``, profiler ops: DebugMode skips them) are kept as events with no
digests, so alignment still sees them.

Limits: one log is one run of one rank (step 0). ``norm`` is a value hash, not a bit hash.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from ..errors import MalformedTraceError
from ..model import MemoryRankStream, TraceRun
from ._util import make_events, sig_of

_CALL_RE = re.compile(r"^(\s*)([A-Za-z_][\w.:]*)\((.*)$")
_MOD_RE = re.compile(r"^(\s*)\[nn\.Mod\]\s+(\S+)")
_HASH_SPLIT = "  # {"


def looks_like(head: bytes) -> bool:
    text = head.decode("utf-8", "replace")
    return ("aten::" in text or "aten." in text) and ("'hash'" in text or "# {" in text)


def _leaves(x: Any) -> list[Any]:
    if isinstance(x, list | tuple):
        return [leaf for item in x for leaf in _leaves(item)]
    if isinstance(x, dict):
        return [leaf for k in sorted(x, key=str) for leaf in _leaves(x[k])]
    return [x]


def load(path: Path) -> TraceRun:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedTraceError(f"{path}: cannot read a DebugMode log ({exc})") from None
    rows: list[dict[str, Any]] = []
    mods: list[tuple[int, str]] = []
    saw_inputs = False
    for ln, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        mm = _MOD_RE.match(line)
        if mm:
            depth = len(mm.group(1))
            while mods and mods[-1][0] >= depth:
                mods.pop()
            mods.append((depth, mm.group(2)))
            continue
        m = _CALL_RE.match(line)
        if not m:
            continue  # headers and free text of debug_string(): not calls
        depth = len(m.group(1))
        while mods and mods[-1][0] >= depth:
            mods.pop()
        log: dict[str, Any] = {}
        if _HASH_SPLIT in line:
            lit = "{" + line.split(_HASH_SPLIT, 1)[1]
            try:
                log = ast.literal_eval(lit)
            except (ValueError, SyntaxError):
                raise MalformedTraceError(
                    f"{path}:{ln}: unreadable hash annotation {lit[:60]!r}"
                ) from None
            if not isinstance(log, dict):
                raise MalformedTraceError(f"{path}:{ln}: hash annotation is not a dict")
        ins = ()
        if "input_hash" in log:
            saw_inputs = True
            ins = tuple(sig_of(v) for v in _leaves(log["input_hash"]))
        outs = tuple(sig_of(v) for v in _leaves(log.get("hash"))) if "hash" in log else ()
        rows.append(
            {
                "step": 0,
                "name": m.group(2),
                "scope": ".".join(name for _, name in mods),
                "inputs": ins,
                "outputs": outs,
                "meta": {"depth": depth},
                "line": ln,
            }
        )
    if not rows:
        raise MalformedTraceError(f"{path}: no DebugMode calls found")
    stream = MemoryRankStream(0, path, make_events(rows), {})
    return TraceRun(
        path=path,
        fmt="debugmode",
        run_id=path.name,
        world_size=None,
        ranks={0: stream},
        records_inputs=saw_inputs,
    )

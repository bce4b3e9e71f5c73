"""A proven setting read from the optimizer's state at the step boundary, where no op trace
can see inside the optimizer's update (a fused multi-tensor kernel is no dispatcher op).

The setting alone carries the difference (its intervention made every step match), and the
trace's first divergence is the optimizer's step given equal inputs: the update itself
computes otherwise. When the state manifests of both runs after the last equal step show
per-parameter counters of that optimizer's state (``optimizer.state.<n>.<key>``, integers)
that differ, although both runs took the same steps and the counters agreed at
initialisation, the update reads a counter the setting changed: a value that should not
depend on the setting, the defect the setting exposes. It is located at the one statement
of that optimizer class's own code that writes the counter and that the static scan
flagged (its finding says why the write is suspect). No such finding, or several writing
that counter: not located, and the setting stays named.
"""

from __future__ import annotations

import re
from typing import Any

from ..evidence_data import ManifestData, TraceCompareData
from ..ledger import Ledger
from ..records import EvidenceKind, Finding

_COUNTER = re.compile(r"^(optimizer\w*)\.state\.(\d+)\.(\w+)$")


def _counters(diffs: list[dict[str, Any]], point: str) -> dict[str, tuple[str, str]]:
    """Integer entries of optimizer state that differ between A and B at ``point``."""
    out: dict[str, tuple[str, str]] = {}
    for d in diffs:
        if d.get("point") != point or d.get("between") != "A vs B":
            continue
        for x in d.get("diff", {}).get("differences", []):
            a, b = str(x.get("a")), str(x.get("b"))
            counter = x.get("section") == "scalar" and _COUNTER.match(x.get("path", ""))
            if counter and a.startswith("int:") and b.startswith("int:"):
                out[x["path"]] = (a.removeprefix("int:"), b.removeprefix("int:"))
    return out


def _writes(f: Finding, key: str) -> bool:
    return re.search(rf"\[\s*['\"]{re.escape(key)}['\"]\s*\]\s*[-+*]?=(?!=)", f.snippet) is not None


def counter_writer(ledger: Ledger, trace: TraceCompareData) -> tuple[str, str] | None:
    """(location, what was read) when the rule of the module docstring applies, else None."""
    origin = next((r for r in trace.rows if r.get("role") == "origin"), None)
    if origin is None or origin.get("kind") != "optimizer" or not origin.get("scope"):
        return None
    owner = str(origin["scope"])
    st = ledger.state()
    manifests = [e for e in st.evidence if e.kind == EvidenceKind.manifest]
    if not manifests:
        return None
    data = manifests[-1].data_as(ManifestData)
    if data.after_step is None:
        return None
    moved = _counters(data.diffs, f"after-{data.after_step}")
    if not moved or _counters(data.diffs, "init"):
        return None
    keys = sorted({_COUNTER.match(p)[3] for p in moved})  # type: ignore[index]
    found = [
        f
        for f in st.findings.values()
        if (f.function or "").split(".")[0] == owner and any(_writes(f, k) for k in keys)
    ]
    if len(found) != 1:
        return None
    f = found[0]
    shown = ", ".join(f"{p} (A {a}, B {b})" for p, (a, b) in sorted(moved.items())[:4])
    why = f.rationale.split(". ")[0].rstrip(".")
    said = (
        f"the optimizer {owner} gives different outputs on equal inputs at {origin.get('scope')}"
        f"::{origin.get('name')} (step {origin.get('step')}), and after step {data.after_step} "
        f"its per-parameter counters differ between the runs: {shown}; the one statement of "
        f"{owner} that the scan flags as writing them is {f.file}:{f.line_start} in "
        f"{f.function} ({f.snippet.strip()}): {why}"
    )
    return f"{f.file}:{f.line_start} ({f.function}: {f.snippet.strip()})", said

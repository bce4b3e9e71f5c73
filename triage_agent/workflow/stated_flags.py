"""A proven launch flag read through what the job's own code made of its text.

A flag proven to carry the whole difference (B without it matches A) may be one whose text
restates what A already computes with (``--set nesterov=false`` over a config whose value is
false), and then the two runs should agree: the difference is made where the job turns the
text into a value. Run B is launched once more with its flag's texts followed
(:mod:`triage_agent.stated_values`): every function of the job's own that is handed one of
them before the first step, and the value it returned. A function that returned a value the
text does not state (``bool("false")``) gives an arm: the same function, returning what the
text states where it is handed that text, the flag left as B has it (``as-stated``). Every
step matching proves the conversion is where the difference is made, and it is a bug there.

Limits: the texts are the flag's values as B's launch passes them, and the part after ``=``
of an override; a function of the launched script (``__main__``) cannot be patched by name
and is only noted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from ..ledger import Ledger
from ..paths import under_run
from ..records import Case, Classification, Hypothesis, RunSpec
from ..runs import LaunchChanges, materialize
from ..stated_values import REPORT, flag_texts
from .arms import Arm


def flag_values(run: RunSpec, key: str) -> list[str]:
    """Every value ``key`` (a ``--flag``) is given in the run's launch, in order."""
    out: list[str] = []
    for argv in run.launch:
        for i, a in enumerate(argv):
            if a == key and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out.append(argv[i + 1])
            elif a.startswith(key + "="):
                out.append(a[len(key) + 1 :])
    return out


def _conversions(out_dir: str) -> list[dict]:
    found: list[dict] = []
    for path in sorted(Path(out_dir).rglob(REPORT)):
        try:
            found += json.loads(path.read_text()).get("conversions", [])
        except (OSError, ValueError):
            continue
    return found


def text_arms(
    case: Case,
    ledger: Ledger,
    proven: Hypothesis,
    key: str,
    *,
    timeout_s: float,
    on_status: Callable[[str], None] = lambda s: None,
) -> list[Arm]:
    """Run B with ``key``'s texts followed; an arm for each function that misread one. A
    reading already in the ledger (a resumed workflow) is read back, not launched again."""
    for n in reversed(ledger.state().notes):
        if n.get("texts_read") == proven.id:
            return [Arm.model_validate(a) for a in n.get("arms", [])]
    texts = flag_texts(flag_values(case.run_b, key))
    if not texts:
        ledger.note(
            f"{proven.id}: run B's launch gives {key} no value to follow",
            texts_read=proven.id,
            arms=[],
        )
        return []
    on_status(f"B with the texts of {key} followed")
    out = materialize(
        case.run_b,
        Path(ledger.workspace),
        "follow",
        timeout_s=timeout_s,
        changes=LaunchChanges(follow=texts, described=[f"follow {key}'s texts"]),
    )
    if not out.ok:
        ledger.note(
            f"{proven.id}: run B with {key}'s texts followed did not complete ({out.error}): "
            "what the job made of them is not read",
            level="warning",
        )
        return []
    seen = _conversions(out.out_dir)
    said = "; ".join(
        f"{c['target']} ({under_run(c['file'], case.run_b.cwd)}:{c['line']}) made {c['value']} "
        f"of {c['text']!r}" + (" (not what the text states)" if c["misread"] else "")
        for c in seen[:6]
    )
    arms: list[Arm] = []
    for c in seen:
        target = c["target"]
        if (
            not c["misread"]
            or target.startswith("__main__:")
            or any(a.intervention.startswith(f"as-stated {target}=") for a in arms)
        ):
            continue
        site = f"{under_run(c['file'], case.run_b.cwd)}:{c['line']}"
        hid = "H-" + hashlib.sha256(f"stated|{key}|{target}|{c['text']}".encode()).hexdigest()[:10]
        arms.append(
            Arm(
                hypothesis=Hypothesis(
                    id=hid,
                    statement=f"{target} turns the text {c['text']!r} that run B's {key} hands "
                    f"it into {c['value']} at {site}, which the text does not state: B "
                    "computes with a value its launch never asked for",
                    category="config-defect",
                    rationale=f"run B with {key}'s texts followed; tested by {target} returning "
                    "what the text states where it is handed it, the flag as B has it",
                    classification=Classification.bug,
                ),
                intervention=f"as-stated {target}={c['text']}",
                run="b",
                kind="config-defect",
                location=f"{site} ({target.split(':', 1)[1]})",
            )
        )
    ledger.note(
        f"{proven.id} read through what the job made of {key}'s texts "
        f"({', '.join(repr(t) for t in texts)}): "
        + (said or "no function of the job's own was handed one before the first step"),
        texts_read=proven.id,
        arms=[a.model_dump(mode="json") for a in arms[:3]],
    )
    return arms[:3]


__all__ = ["flag_values", "text_arms"]

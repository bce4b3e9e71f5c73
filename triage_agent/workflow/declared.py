"""Declared differences between run A and run B, each proposed as a hypothesis with the
intervention that tests it on B.

What the runs were told differs is read from the case and from each baseline's recorded
provenance, never guessed: environment variables (the case's and the numerics variables
the provenance records), launch flags of commands that are otherwise the same program, and
keys of the JSON config files those flags name. Each difference becomes "this difference
causes it", tested by giving B A's value (``env``, ``unset``, ``config``) in an
uninstrumented rerun compared with A over every step and rank, and in the other direction
(A given B's value) as well: a flag only one run passes is dropped from it (``drop``) or
added to the other.

Ranked, not chosen: variables known to change kernels or reduction orders first, then the
other variables, then config keys, then flags; the engine tests them in that order while
the budget lasts. Limits: a JSON key present only in one run cannot be removed (it is
tested by adding it to the other run); runs whose commands differ in number or program are
not compared flag by flag (the difference is the shape of the job, not a setting).

:func:`positional_differences` says where that shape differs (a positional argument, the
number of commands), for a reader; no intervention changes a positional argument, so they
are reported, never proposed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from ..interventions import CONFIG_FLAGS
from ..provenance import NUMERIC_ENV_EXACT, NUMERIC_ENV_PREFIXES
from ..records import Case, Classification, Hypothesis, Provenance, RunSpec
from .classify import CLASSIFICATION

Kind = Literal["env", "flag", "config-key", "positional"]

# Values that name a floating-point precision: a setting whose two values are two of these
# asks the runs to compute in different precisions, a numerical policy by its own values.
PRECISIONS = frozenset(
    {
        *("fp64", "float64", "double", "fp32", "float32", "float", "tf32"),
        *("fp16", "float16", "half", "bf16", "bfloat16"),
        *("fp8", "float8_e4m3fn", "float8_e5m2", "e4m3", "e5m2"),
    }
)


# Variables that pin an input no launch otherwise controls: Python's string hashing (the
# iteration order of every set and of dicts built from one). A difference they carry is an
# order the job's own code took from them, not a choice of the numerical stack.
UNCONTROLLED_ENV = frozenset({"PYTHONHASHSEED"})


def uncontrolled(location: str) -> bool:
    """Whether a setting's location (``env:VAR``) names an uncontrolled input."""
    kind, _, key = location.partition(":")
    return kind == "env" and key in UNCONTROLLED_ENV


def _precision(v: Any) -> str | None:
    if not isinstance(v, str):
        return None
    name = v.strip().lower().removeprefix("torch.")
    return name if name in PRECISIONS else None


class DeclaredDifference(BaseModel):
    kind: Kind
    key: str
    a: Any = None
    b: Any = None
    a_has: bool = True
    b_has: bool = True
    source: str = "case"

    @property
    def intervention(self) -> str | None:
        """The one change that gives B A's value (a flag only B has is dropped), or None
        when the vocabulary has none (a JSON key only B has)."""
        return self.on("b")

    def on(self, run: str) -> str | None:
        """The one change that gives ``run`` the other run's value, or None."""
        mine, theirs = (self.b, self.a) if run == "b" else (self.a, self.b)
        has, they_have = (self.b_has, self.a_has) if run == "b" else (self.a_has, self.b_has)
        if self.kind == "env":
            return f"env {self.key}={theirs}" if they_have else f"unset {self.key}"
        if self.kind == "positional":
            return None  # the job's shape: no intervention gives a run another program
        if self.kind == "flag":
            if not they_have:
                return f"drop {self.key}" if has else None
            return f"config {self.key}" if theirs is None else f"config {self.key}={theirs}"
        if not they_have:
            return None  # a JSON key cannot be removed from a config file
        return f"config {self.key}={json.dumps(theirs)}"

    def tests(self) -> list[tuple[str, str]]:
        """(run, intervention) in both directions: B given A's value first, then A given B's."""
        return [(r, iv) for r in ("b", "a") if (iv := self.on(r)) is not None]

    @property
    def precision(self) -> bool:
        """A setting (not a variable) whose two values are two different precisions."""
        pa, pb = _precision(self.a), _precision(self.b)
        return self.kind != "env" and pa is not None and pb is not None and pa != pb

    def said(self) -> str:
        def one(has: bool, v: Any) -> str:
            return ("unset" if self.kind == "env" else "absent") if not has else json.dumps(v)

        if self.kind == "positional" and self.key == "commands":
            return f"the runs launch a different number of commands (A: {self.a}, B: {self.b})"
        what = {
            "env": "environment variable",
            "flag": "launch flag",
            "config-key": "config key",
            "positional": "positional",
        }
        return (
            f"the runs differ in {what[self.kind]} {self.key} (A: {one(self.a_has, self.a)}, "
            f"B: {one(self.b_has, self.b)})"
        )

    def location(self) -> str:
        return f"{'env' if self.kind == 'env' else 'config'}:{self.key}"


def _numeric(key: str) -> bool:
    return key in NUMERIC_ENV_EXACT or key.startswith(NUMERIC_ENV_PREFIXES)


def _key_diffs(
    kind: Kind, a: dict[str, Any], b: dict[str, Any], source: str
) -> list[DeclaredDifference]:
    """Every key whose value differs, or that one side has and the other lacks."""
    return [
        DeclaredDifference(
            kind=kind, key=k, a=a.get(k), b=b.get(k), a_has=k in a, b_has=k in b, source=source
        )
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k) or (k in a) != (k in b)
    ]


def _env_diffs(a: dict[str, str], b: dict[str, str], source: str) -> list[DeclaredDifference]:
    return [
        DeclaredDifference(
            kind="env", key=k, a=a.get(k), b=b.get(k), a_has=k in a, b_has=k in b, source=source
        )
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]


def _split(argv: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """``--k=v`` and ``--k v`` as k -> v, a bare switch ``--k`` as k -> None; and what is
    left, the positional arguments (the program, its script, ...)."""
    flags: dict[str, str | None] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and len(a) > 2:
            if "=" in a:
                k, _, v = a.partition("=")
                flags[k] = v
            elif i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                flags[a] = argv[i + 1]
                i += 1
            else:
                flags[a] = None
        else:
            rest.append(a)
        i += 1
    return flags, rest


def parse_flags(argv: list[str]) -> dict[str, str | None]:
    return _split(argv)[0]


def _config_file(run: RunSpec, flags: dict[str, str | None]) -> Path | None:
    for f in CONFIG_FLAGS:
        v = flags.get(f)
        if v and v.endswith(".json"):
            p = Path(v)
            return p if p.is_absolute() else Path(run.cwd or ".") / p
    return None


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(doc, dict):
        out: dict[str, Any] = {}
        for k, v in doc.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): doc}


def _json_keys(path: Path) -> dict[str, Any] | None:
    try:
        return _flatten(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _launch_diffs(a: RunSpec, b: RunSpec) -> list[DeclaredDifference]:
    if len(a.launch) != len(b.launch) or any(
        _split(x)[1] != _split(y)[1] for x, y in zip(a.launch, b.launch, strict=True)
    ):
        return []
    out: list[DeclaredDifference] = []
    for xa, xb in zip(a.launch, b.launch, strict=True):
        fa, fb = parse_flags(xa), parse_flags(xb)
        ca, cb = _config_file(a, fa), _config_file(b, fb)
        ka = _json_keys(ca) if ca else None
        kb = _json_keys(cb) if cb else None
        if ka is not None and kb is not None:
            out += _key_diffs("config-key", ka, kb, f"{ca.name} vs {cb.name}")
        skip = set(CONFIG_FLAGS) if ka is not None and kb is not None else set()
        out += [
            d
            for d in _key_diffs("flag", fa, fb, "argv")
            if d.key not in skip and "{out}" not in str(d.a) + str(d.b)
        ]
    return list({(d.kind, d.key): d for d in out}.values())


def positional_differences(a: RunSpec, b: RunSpec) -> list[DeclaredDifference]:
    """The positional arguments (the program, its script, a subcommand, a file named bare)
    in which the runs' launch commands differ, command by command, each with both values (an
    argument only one run passes is absent in the other); commands that differ in number are
    one difference. Placeholders such as ``{out}`` stand for the same thing in both runs. A
    run that declares no command (its metrics given as files) declares no difference."""
    if not a.launch or not b.launch:
        return []
    if len(a.launch) != len(b.launch):
        return [
            DeclaredDifference(kind="positional", key="commands", a=len(a.launch), b=len(b.launch))
        ]
    out: list[DeclaredDifference] = []
    for i, (xa, xb) in enumerate(zip(a.launch, b.launch, strict=True)):
        pa, pb = _split(xa)[1], _split(xb)[1]
        where = f" of command {i + 1}" if len(a.launch) > 1 else ""
        for j in range(max(len(pa), len(pb))):
            va = pa[j] if j < len(pa) else None
            vb = pb[j] if j < len(pb) else None
            if va != vb:
                out.append(
                    DeclaredDifference(
                        kind="positional",
                        key=f"argument {j + 1}{where}",
                        a=va,
                        b=vb,
                        a_has=j < len(pa),
                        b_has=j < len(pb),
                        source="argv",
                    )
                )
    return out


def declared_differences(
    case: Case, prov_a: Provenance | None = None, prov_b: Provenance | None = None
) -> list[DeclaredDifference]:
    """Every declared difference, ranked: numerics variables, other variables, config
    keys, flags."""
    env = _env_diffs(case.run_a.env, case.run_b.env, "case")
    seen = {d.key for d in env}
    if prov_a is not None and prov_b is not None:
        env += [d for d in _env_diffs(prov_a.env, prov_b.env, "provenance") if d.key not in seen]
    launch = _launch_diffs(case.run_a, case.run_b)
    rank = {"env": 1, "config-key": 2, "flag": 3}
    return sorted(
        env + launch,
        key=lambda d: (0 if d.kind == "env" and _numeric(d.key) else rank[d.kind], d.key),
    )


def selects_computation(d: DeclaredDifference) -> bool:
    """A variable of the numerical stack (threads, kernels, workspaces, libraries' own
    switches) or an uncontrolled input: the environment a run computes in. Any other variable
    is read by the job's own code, like a flag: a setting of the job."""
    return d.kind == "env" and (_numeric(d.key) or d.key in UNCONTROLLED_ENV)


def hypothesis_for(d: DeclaredDifference) -> Hypothesis:
    if d.kind == "env":
        category = "environment" if selects_computation(d) else "config"
    else:
        category = "precision" if d.precision else "config"
    hid = (
        "H-"
        + hashlib.sha256(
            json.dumps(["declared", d.kind, d.key, d.a, d.b], default=str).encode()
        ).hexdigest()[:10]
    )
    return Hypothesis(
        id=hid,
        statement=f"{d.said()}: this difference changes the bits",
        category=category,
        rationale=f"a declared difference ({d.source}); tested by giving B A's value alone: "
        f"{d.intervention}",
        classification=CLASSIFICATION.get(category, Classification.unknown),
    )

"""Interventions on B that may align the policy diagnosed at a differing boundary, drawn
from B's own configuration surface, never from the case's answer.

Three sources, each candidate naming the policy it governs:

- DeepSpeed JSON config keys known to govern a diagnosis (``CATALOGUE``): an optimizer
  setting held differently is ``optimizer.params.<setting>`` (DeepSpeed hands those to the
  optimizer it builds), offered with A's value only when A holds one value for every paired
  tensor (a per-tensor set is no single config value); a gradient scale is
  ``gradient_clipping`` at A's clip; gradient arithmetic is the reduce and accumulation
  dtypes; an update computed otherwise is DeepSpeed's torch optimizer.
- the launch flags of the script B launches that take a finite set of values
  (argparse ``choices=``), read statically with ``ast``: every value B does not already
  pass is a ``config --flag=VALUE``; a boolean flag (``store_true``, ``store_false``,
  ``BooleanOptionalAction``) B does not pass is a bare ``config --flag``.
- replacements owned by this project (:mod:`.aligners`) of a DeepSpeed call where DeepSpeed
  has no knob, applied through the injected bootstrap.

Ranked by the diagnosis: candidates whose governed policy shares a word with the diagnosed
one first (config keys, then flags, then replacements), the other flags after them.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..errors import InputError
from ..interventions import _config_arg
from ..records import RunSpec
from .aligners import ALIGNERS
from .model import Candidate, Policy, SideMeta

# Optimizer settings DeepSpeed passes through ``optimizer.params`` to the optimizer it builds.
OPTIMIZER_PARAMS = ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize")

# The words a diagnosis is said in, to rank what a candidate governs against it.
WORDS: dict[str, set[str]] = {
    "weight_decay": {"decay", "wd"},
    "lr": {"lr", "learning"},
    "betas": {"beta", "betas", "momentum"},
    "eps": {"eps", "epsilon"},
    "gradient-scale": {"clip", "clipping", "norm", "scale"},
    "grads": {"grad", "grads", "gradient", "reduce", "reduction", "accum", "communication"},
    "moments": {"adam", "optimizer", "fused", "moment", "moments"},
    "master_weights": {"adam", "optimizer", "fused", "master", "update"},
    "forward": {"precision", "dtype", "attention", "kernel", "tf32", "matmul"},
}


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", text.lower()) if w}


def diagnosis_words(policy: Policy, boundary: str) -> set[str]:
    if policy.kind == "setting" and policy.setting:
        return _words(policy.setting) | WORDS.get(policy.setting, set())
    if policy.kind in ("gradient-scale", "forward"):
        return WORDS[policy.kind]
    return WORDS.get(boundary, set())


def setting_value(text: str) -> Any:
    """A captured setting (``float:0x1.99999ap-4``, ``(float:.., float:..)``, ``bool:True``)
    as JSON, or None when it has no JSON form."""
    if text.startswith("(") and text.endswith(")"):
        parts = [setting_value(p.strip()) for p in text[1:-1].split(",") if p.strip()]
        return None if any(p is None for p in parts) else parts
    kind, _, raw = text.partition(":")
    if kind == "tensor":
        return setting_value(raw)
    try:
        if kind == "float":
            return float.fromhex(raw)
        if kind in ("int", "bool"):
            return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return None
    return None


def b_config(run: RunSpec) -> dict | None:
    """The JSON config B's commands name, or None."""
    for argv in run.launch:
        spot = _config_arg(list(argv))
        if spot is not None and "{" not in spot[2]:
            try:
                return json.loads((Path(run.cwd or ".") / spot[2]).read_text())
            except (OSError, json.JSONDecodeError):
                return None
    return None


def _get(doc: dict, key: str) -> Any:
    node: Any = doc
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _uniform(meta: SideMeta, step: int, names: list[str], key: str) -> Any:
    held = {meta.settings.get(step, {}).get(n, {}).get(key) for n in names}
    if len(held) != 1 or None in held:
        return None
    return setting_value(held.pop())


def catalogue(
    policy: Policy, boundary: str, step: int, ma: SideMeta, mb: SideMeta, config: dict | None
) -> list[tuple[str, Any, str]]:
    """(config key, value, the policy it governs) the catalogue offers for this diagnosis."""
    out: list[tuple[str, Any, str]] = []
    if policy.kind == "setting" and policy.setting in OPTIMIZER_PARAMS:
        value = _uniform(ma, step, sorted(ma.settings.get(step, {})), policy.setting)
        if value is not None:
            out.append(
                (f"optimizer.params.{policy.setting}", value, f"the optimizer's {policy.setting}")
            )
    elif policy.kind == "gradient-scale" and ma.clip is not None and ma.clip != mb.clip:
        out.append(("gradient_clipping", ma.clip, "the gradient-norm clip"))
    elif policy.kind == "arithmetic" and boundary == "grads":
        out.append(("communication_data_type", "fp32", "the dtype gradients are reduced in"))
        out.append(("data_types.grad_accum_dtype", "fp32", "the dtype gradients accumulate in"))
    elif policy.kind == "arithmetic" and "torch.optim" not in mb.optimizer:
        out.append(("optimizer.params.torch_adam", True, "the update's implementation (torch)"))
    if config is None:
        return []
    return [(k, v, g) for k, v, g in out if _get(config, k) != v]


class LaunchFlag(BaseModel):
    """One argparse option with a finite set of values: its choices, or its bare forms."""

    name: str
    choices: list[Any] = []
    bare: list[str] = Field(default_factory=list, description="forms that take no value")
    default: Any = None
    help: str = ""


_BOOLEAN = ("store_true", "store_false", "BooleanOptionalAction")


def _action(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def launch_flags(script: Path) -> list[LaunchFlag]:
    """The ``add_argument`` calls of ``script`` with ``choices=`` or a boolean action,
    read without running it."""
    try:
        tree = ast.parse(script.read_text(), filename=str(script))
    except (OSError, SyntaxError, ValueError) as exc:
        raise InputError(f"cannot read B's script {script}: {exc}") from None
    flags: list[LaunchFlag] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant)]
        long = next((n for n in names if isinstance(n, str) and n.startswith("--")), None)
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        action = _action(kw.get("action"))
        help_text = kw["help"].value if isinstance(kw.get("help"), ast.Constant) else ""
        if long is not None and action in _BOOLEAN:
            bare = [long] + ([f"--no-{long[2:]}"] if action == "BooleanOptionalAction" else [])
            flags.append(LaunchFlag(name=long, bare=bare, help=str(help_text)))
            continue
        if long is None or "choices" not in kw:
            continue
        try:
            choices = list(ast.literal_eval(kw["choices"]))
            default = ast.literal_eval(kw["default"]) if "default" in kw else None
        except (ValueError, SyntaxError, TypeError):
            continue  # choices computed at run time: not read statically
        flags.append(LaunchFlag(name=long, choices=choices, default=default, help=str(help_text)))
    return flags


def _script(run: RunSpec) -> tuple[list[str], Path] | None:
    for argv in run.launch:
        for a in argv:
            if a.endswith(".py") and "{" not in a:
                p = Path(a) if Path(a).is_absolute() else Path(run.cwd or ".") / a
                if p.is_file():
                    return list(argv), p
    return None


def _passed(argv: list[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a.startswith(flag + "="):
            return a[len(flag) + 1 :]
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _flag_candidates(run: RunSpec, words: set[str]) -> list[Candidate]:
    found = _script(run)
    if found is None:
        return []
    argv, script = found
    out = []
    for f in launch_flags(script):
        now = _passed(argv, f.name)
        now = now if now is not None else f.default
        about = f"{f.name} {f.help}".strip()
        # (setting, how B stands on it now, the argparse form offering it) per value B could take
        offers = [
            (form, f"boolean, B does not pass {form}", "boolean action")
            for form in f.bare
            if not any(form in a for a in run.launch)
        ]
        offers += [
            (f"{f.name}={value}", f"choices {f.choices}, B passes {now}", "choices")
            for value in f.choices
            if str(value) != str(now)
        ]
        out += [
            Candidate(
                intervention=f"config {setting}",
                source="launch-flag",
                governs=f"launch flag {about} ({how})",
                why=f"argparse {action} of {f.name} in {script.name}",
                relevant=bool(_words(about) & words),
            )
            for setting, how, action in offers
        ]
    return out


def candidates(
    policy: Policy, boundary: str, step: int, ma: SideMeta, mb: SideMeta, run_b: RunSpec
) -> list[Candidate]:
    """Every candidate for the diagnosis, ranked: relevant config keys, flags and
    replacements first, the other flags after them."""
    words = diagnosis_words(policy, boundary)
    config = b_config(run_b)
    keys = [
        Candidate(
            intervention=f"config {k}={json.dumps(v)}",
            source="config-key",
            governs=g,
            why=f"catalogue: DeepSpeed's {k} governs {g}; A's value",
            relevant=True,
        )
        for k, v, g in catalogue(policy, boundary, step, ma, mb, config)
    ]
    flags = _flag_candidates(run_b, words)
    swaps = [
        Candidate(
            intervention=f"replace {a.target}={a.replacement}",
            source="replace",
            governs=a.governs,
            why="a call of DeepSpeed's replaced through the injected bootstrap",
            relevant=True,
        )
        for a in ALIGNERS
        if a.applies(policy, mb)
    ]
    return keys + [c for c in flags if c.relevant] + swaps + [c for c in flags if not c.relevant]

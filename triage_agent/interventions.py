"""The intervention vocabulary: change one thing in one run, rerun it uninstrumented, compare.

One vocabulary for the CLI (``triage rerun --intervene``), the MCP server
(``rerun_with_intervention``) and the workflow. Each intervention is one line of text:

=============================================  =========  ===========================================
``env KEY=VALUE`` / ``unset KEY``              env        set / remove a variable in every process
``config a.b.c=VALUE``                         config     a key of the JSON config file the run's
                                                          argv names (VALUE is JSON, else a string),
                                                          written to a copy the argv then names
``config --flag=VALUE``                        config     set (or add) a launch flag in every command
``config --flag``                              config     add a bare flag (argparse store_true)
``drop --flag``                                drop       remove a launch flag (and its value) from
                                                          every command
``suppress pkg.mod:Qual.name``                 suppress   the function returns None, in every process
``suppress pkg.mod:Qual.name@init``            suppress   only its calls before the first step do
``suppress pkg.mod:Qual.name@FILE:LINE``       suppress   only the calls the job's line makes do
``thin pkg.mod:Qual.name[@FILE:LINE]=K``        suppress   one call in every K goes through (the
                                                          K-th), the others return None
``replace pkg.mod:Qual.name=pkg2.mod:func``    replace    calls go to the other function instead
``isolate-rng pkg.mod:Qual.name``              isolate    the function runs under every generator's
                                                          state saved before and restored after it
``seed-rng pkg.mod:Qual.name``                  seed       the function runs under every generator
                                                          seeded from its call's plain arguments
                                                          (ints, strings: a sample's index), put
                                                          back after it: its draws depend on the
                                                          call, not the process or order it runs in
``set torch.backends.x.y=V``                   set        a global numeric setting (:mod:`.settings`),
                                                          at start and before every module forward
``isolate-writes pkg.mod:Qual.name``           isolate    the function runs with the tensors it is
                                                          handed (a module's parameters, buffers and
                                                          gradients too) and modules' modes put back
                                                          after it
``as-stated pkg.mod:Qual.name=TEXT``            stated     the function runs as it is; where it is
                                                          handed TEXT (a launch's flag value), it
                                                          returns the value TEXT states instead
                                                          (:mod:`.stated_values`)
``copy-returns pkg.mod:Qual.name``              copy       the function runs as it is; its callers get
                                                          copies of the tensors it returns (a cache's
                                                          own tensor is not theirs to write)
``restore-state PART[,PART]``                   restore    after a resume, at its first module forward,
                                                          the parts the saving process had at that step
                                                          (or at its end, if it logged no later step):
                                                          ``modelK`` (a second top-level module),
                                                          ``optimizer`` (per-parameter state, by name),
                                                          ``grads`` (accumulated gradients), ``ties``
                                                          (parameter names sharing one tensor),
                                                          ``modes`` (modules' training modes),
                                                          ``hooks`` (hooks registered again),
                                                          ``buffers`` (buffers registered outside
                                                          the state_dict), ``groups`` (param
                                                          groups' hyper-parameters)
``outplace FILE:LINE``                          outplace   the in-place torch calls that line of the job
                                                          makes run out of place (result returned,
                                                          the tensor left alone)
``fill-empty FILE:LINE``                        fill       the tensors that line of the job allocates
                                                          uninitialised (``torch.empty``...) zeroed
``pin-seed FILE:LINE=V[,V...]``                 seed       the seedings that line of the job makes get
                                                          V, in order (:mod:`.seed_pins`): the other
                                                          run's values there
``restore-attrs pkg.mod:Class.attr=V[,...]``    attrs      after ``Class.load_state_dict`` returns, the
                                                          attribute is set to V (JSON; the other run's
                                                          value at that boundary)
``restore-globals pkg.mod.NAME=V[,...]``      globals    where the resumed process declares its
                                                          resume (``MetricLog(resumed_from=K)``),
                                                          the job module's global is set to V (the
                                                          other run's value at that boundary)
``sync-grads NAME[,NAME]``                      sync       the parameters' gradients averaged across
                                                          the ranks as the backward accumulates
                                                          them (a parameter left out of data-
                                                          parallel synchronisation)
``tie-params NAME=NAME[;...]``               ties       the named parameters made one tensor (the
                                                          first's) before any optimizer takes them
                                                          (a weight the other run shares)
``restore-rng`` / ``restore-scheduler``        policy     the run policies of :mod:`.policies`
``restore-cursors`` / ``deterministic``
``recompute-state`` / ``rebind-optimizer``
``keep-saved`` / ``unique-params`` / ``observe-hooks``
``advance-epochs`` / ``unscale-first``
``revert path[,path...]``                      revert     files back to the other run's revision
``patch FILE.diff``                             patch      a unified diff applied to a throwaway copy
                                                          of the run's tree, which the rerun runs
=============================================  =========  ===========================================

:func:`rerun` applies the interventions to a copy of the run's launch (nothing in the user's
tree is edited) and launches it through :func:`triage_agent.runs.materialize`, cached by
what changed; :func:`compare_runs` compares the metric fingerprints of two outcomes over
every step and rank. A ``revert`` is parsed and modelled here but applied by the workflow's
fix check, which prepares a checkout and passes it as ``source_dir``.

Limits: a JSON config the script builds in Python (``deepspeed.initialize(config=dict)``)
is not in the argv and cannot be changed by ``config``; ``suppress``/``replace`` cannot
reach functions of the ``__main__`` script (put them in a module) and say so when the patched
function was never called.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from .errors import InputError
from .evidence_data import RerunData
from .ledger import Ledger
from .metrics import diff_metrics, load_metrics
from .policies import CALLABLE_RE, POLICIES, POLICY_HELP, FunctionPatch
from .records import Case, EvidenceResult, RunSpec
from .restore_state import PART_RE
from .runs import (
    LaunchChanges,
    Progress,
    RunOutcome,
    completed_despite_exit,
    materialize,
    rerun_evidence,
)
from .seed_pins import SITE_RE, SeedPin
from .settings import SETTINGS, settable

ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CONFIG_FLAGS = ("--deepspeed_config", "--deepspeed-config", "--config")
MAX_HASHED_BYTES = 16 << 20
# Variables that make a process load code: refused from callers who may not run code.
CODE_ENV = frozenset(
    {
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "PATH",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONUSERBASE",
        "PYTHONBREAKPOINT",
        "PYTHONEXECUTABLE",
        "PYTHONINSPECT",
        "BASH_ENV",
        "ENV",
    }
)


class EnvIntervention(BaseModel):
    kind: Literal["env"] = "env"
    key: str = Field(pattern=ENV_KEY_RE.pattern)
    value: str | None = Field(description="None removes the variable")


class ConfigIntervention(BaseModel):
    kind: Literal["config"] = "config"
    key: str = Field(description="a dotted JSON path (a.b.c) or a launch flag (--flag)")
    value: Any = Field(description="JSON for a config key, the literal text for a flag")

    @property
    def is_flag(self) -> bool:
        return self.key.startswith("--")


class SetIntervention(BaseModel):
    kind: Literal["set"] = "set"
    name: str = Field(description="a name of triage_agent.settings.SETTINGS that can be set")
    value: Any = Field(description="JSON, else the literal text")


class IsolateWritesIntervention(BaseModel):
    kind: Literal["isolate-writes"] = "isolate-writes"
    target: str = Field(pattern=CALLABLE_RE.pattern)


class FillEmptyIntervention(BaseModel):
    kind: Literal["fill-empty"] = "fill-empty"
    site: str = Field(pattern=SITE_RE, description="file:line of the job's empty allocation")


class CopyReturnsIntervention(BaseModel):
    kind: Literal["copy-returns"] = "copy-returns"
    target: str = Field(pattern=CALLABLE_RE.pattern)


class AsStatedIntervention(BaseModel):
    kind: Literal["as-stated"] = "as-stated"
    target: str = Field(pattern=CALLABLE_RE.pattern)
    text: str = Field(min_length=1, description="the launch's text the function is handed")


class RestoreStateIntervention(BaseModel):
    kind: Literal["restore-state"] = "restore-state"
    parts: list[str] = Field(min_length=1, description="modelK (K >= 1) or optimizer")


class OutplaceIntervention(BaseModel):
    kind: Literal["outplace"] = "outplace"
    site: str = Field(pattern=SITE_RE, description="file:line of the job's in-place call")


class PinSeedIntervention(BaseModel):
    kind: Literal["pin-seed"] = "pin-seed"
    site: str = Field(pattern=SITE_RE, description="file:line of the job's seeding call")
    values: list[int] = Field(min_length=1, description="what its seedings get, in order")


class DropIntervention(BaseModel):
    kind: Literal["drop"] = "drop"
    key: str = Field(pattern=r"^--[A-Za-z0-9][\w.-]*$", description="the launch flag removed")


class IsolateRngIntervention(BaseModel):
    kind: Literal["isolate-rng"] = "isolate-rng"
    target: str = Field(pattern=CALLABLE_RE.pattern)


class SeedRngIntervention(BaseModel):
    kind: Literal["seed-rng"] = "seed-rng"
    target: str = Field(pattern=CALLABLE_RE.pattern)


ATTR_RE = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):([A-Za-z_]\w*)\.([A-Za-z_]\w*)")


class RestoreAttrsIntervention(BaseModel):
    kind: Literal["restore-attrs"] = "restore-attrs"
    attrs: dict[str, Any] = Field(
        min_length=1, description="pkg.mod:Class.attr -> the value set after Class.load_state_dict"
    )

    def patches(self) -> list[FunctionPatch]:
        by_class: dict[str, dict[str, Any]] = {}
        for key, value in self.attrs.items():
            mod, cls, attr = ATTR_RE.fullmatch(key).groups()  # type: ignore[union-attr]
            by_class.setdefault(f"{mod}:{cls}.load_state_dict", {})[attr] = value
        return [FunctionPatch(target=t, set_after=a) for t, a in by_class.items()]


GLOBAL_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\.([A-Za-z_]\w*)")


class RestoreGlobalsIntervention(BaseModel):
    kind: Literal["restore-globals"] = "restore-globals"
    values: dict[str, Any] = Field(
        min_length=1,
        description="pkg.mod.NAME -> the value the module global is given where the resumed "
        "process declares its resume",
    )


class SyncGradsIntervention(BaseModel):
    kind: Literal["sync-grads"] = "sync-grads"
    params: list[str] = Field(
        min_length=1,
        description="parameter names (as the model names them, a wrapper's prefix left out) "
        "whose gradients are averaged across the ranks as the backward accumulates them",
    )


class TieParamsIntervention(BaseModel):
    kind: Literal["tie-params"] = "tie-params"
    groups: list[list[str]] = Field(
        min_length=1,
        description="groups of parameter names (the model's own) each made one tensor, the "
        "first's, before any optimizer takes them",
    )

    def text(self) -> str:
        return ";".join("=".join(g) for g in self.groups)


class SuppressIntervention(BaseModel):
    kind: Literal["suppress"] = "suppress"
    target: str = Field(pattern=CALLABLE_RE.pattern)
    scope: Literal["run", "init"] = Field(
        default="run", description="init: only the calls made before the first step begins"
    )
    site: str | None = Field(
        default=None,
        description="FILE:LINE: only the calls the job makes from that line (its innermost "
        "frame outside torch, DeepSpeed and this tool)",
    )
    every: int | None = Field(
        default=None,
        ge=2,
        description="thin: one call in every K goes through (the K-th), the others return "
        "None: a call made K times as often as the other run makes it, brought to its rate",
    )


class ReplaceIntervention(BaseModel):
    kind: Literal["replace"] = "replace"
    target: str = Field(pattern=CALLABLE_RE.pattern)
    replacement: str = Field(pattern=CALLABLE_RE.pattern)


class PolicyIntervention(BaseModel):
    kind: Literal["policy"] = "policy"
    policy: Literal[
        "restore-rng",
        "restore-scheduler",
        "restore-cursors",
        "deterministic",
        "recompute-state",
        "rebind-optimizer",
        "keep-saved",
        "unique-params",
        "observe-hooks",
        "advance-epochs",
        "unscale-first",
    ]


class PatchIntervention(BaseModel):
    kind: Literal["patch"] = "patch"
    path: str = Field(min_length=1, description="a unified diff (git diff or diff -u), -p1 paths")


class RevertIntervention(BaseModel):
    kind: Literal["revert"] = "revert"
    paths: list[str] = Field(min_length=1, description="repository-relative files")


Intervention = Annotated[
    EnvIntervention
    | ConfigIntervention
    | DropIntervention
    | SetIntervention
    | IsolateRngIntervention
    | SeedRngIntervention
    | IsolateWritesIntervention
    | AsStatedIntervention
    | CopyReturnsIntervention
    | FillEmptyIntervention
    | PinSeedIntervention
    | OutplaceIntervention
    | RestoreStateIntervention
    | RestoreAttrsIntervention
    | RestoreGlobalsIntervention
    | SyncGradsIntervention
    | TieParamsIntervention
    | SuppressIntervention
    | ReplaceIntervention
    | PolicyIntervention
    | PatchIntervention
    | RevertIntervention,
    Field(discriminator="kind"),
]
INTERVENTION = TypeAdapter(Intervention)

FORMS = (
    "env KEY=VALUE, unset KEY, config a.b.c=VALUE, config --flag=VALUE, config --flag, "
    "drop --flag, set torch.NAME=VALUE, suppress pkg.mod:Qual.name[@init|@FILE:LINE], thin pkg.mod:Qual.name[@FILE:LINE]=K, replace pkg.mod:Qual.name=pkg2.mod:func, "
    "isolate-rng pkg.mod:Qual.name, seed-rng pkg.mod:Qual.name, isolate-writes pkg.mod:Qual.name, as-stated pkg.mod:Qual.name=TEXT, copy-returns pkg.mod:Qual.name, pin-seed FILE:LINE=V[,V...], outplace FILE:LINE, fill-empty FILE:LINE, restore-state model|modelK|optimizer|groups|grads|ties|modes|hooks|buffers, "
    "restore-attrs pkg.mod:Class.attr=VALUE[,...], restore-globals pkg.mod.NAME=VALUE[,...], sync-grads NAME[,NAME], tie-params NAME=NAME[;NAME=NAME], "
    "restore-rng, restore-cursors, restore-scheduler, deterministic, recompute-state, "
    "rebind-optimizer, keep-saved, unique-params, observe-hooks, advance-epochs, unscale-first, "
    "revert path[,path...]"
)


def _bad(text: str, why: str) -> InputError:
    return InputError(f"intervention {text!r}: {why} (forms: {FORMS})")


def parse_intervention(text: str) -> Intervention:
    """One intervention from its text form; a one-line InputError for anything else."""
    line = " ".join(str(text).split())
    word, _, rest = line.partition(" ")
    try:
        if word in POLICIES and not rest:
            return PolicyIntervention(policy=word)  # type: ignore[arg-type]
        if word == "env":
            key, eq, value = rest.partition("=")
            if not eq or not ENV_KEY_RE.fullmatch(key):
                raise _bad(text, "expected env KEY=VALUE with KEY a variable name")
            return EnvIntervention(key=key, value=value)
        if word == "unset":
            if not ENV_KEY_RE.fullmatch(rest):
                raise _bad(text, "expected unset KEY with KEY a variable name")
            return EnvIntervention(key=rest, value=None)
        if word == "config":
            return _parse_config(text, rest)
        if word == "set":
            name, eq, raw = rest.partition("=")
            if not eq or not settable(name):
                names = ", ".join(n for n in SETTINGS if settable(n))
                raise _bad(text, f"expected set NAME=VALUE, NAME one of: {names}")
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
            if value in ("True", "False"):
                value = value == "True"
            return SetIntervention(name=name, value=value)
        if word == "drop":
            if not re.fullmatch(r"--[A-Za-z0-9][\w.-]*", rest):
                raise _bad(text, "expected drop --flag")
            return DropIntervention(key=rest)
        if word == "pin-seed":
            site, eq, raw = rest.partition("=")
            try:
                values = [int(v) for v in raw.split(",") if v.strip()]
            except ValueError:
                values = []
            if not eq or not values or not re.fullmatch(SITE_RE, site):
                raise _bad(text, "expected pin-seed FILE:LINE=V[,V...] with integer values")
            return PinSeedIntervention(site=site, values=values)
        if word == "restore-state":
            parts = [p.strip() for p in rest.split(",") if p.strip()]
            if not parts or not all(re.fullmatch(PART_RE, p) for p in parts):
                raise _bad(
                    text,
                    "expected restore-state PART[,PART] with PART model, model1..model9, optimizer, "
                    "groups, grads, ties, modes, hooks or buffers",
                )
            return RestoreStateIntervention(parts=parts)
        if word == "fill-empty":
            if not re.fullmatch(SITE_RE, rest):
                raise _bad(text, "expected fill-empty FILE:LINE")
            return FillEmptyIntervention(site=rest)
        if word == "outplace":
            if not re.fullmatch(SITE_RE, rest):
                raise _bad(text, "expected outplace FILE:LINE")
            return OutplaceIntervention(site=rest)
        if word == "restore-attrs":
            return RestoreAttrsIntervention(attrs=_parse_attrs(text, rest))
        if word == "sync-grads":
            params = [p.strip() for p in rest.split(",") if p.strip()]
            if not params or not all(re.fullmatch(r"\w[\w.]*", p) for p in params):
                raise _bad(text, "expected sync-grads NAME[,NAME] (parameter names)")
            return SyncGradsIntervention(params=params)
        if word == "tie-params":
            groups = [g.split("=") for g in rest.split(";") if g]
            if not groups or not all(
                len(g) >= 2 and all(re.fullmatch(r"\w[\w.]*", n) for n in g) for g in groups
            ):
                raise _bad(text, "expected tie-params NAME=NAME[;NAME=NAME] (parameter names)")
            return TieParamsIntervention(groups=groups)
        if word == "restore-globals":
            return RestoreGlobalsIntervention(values=_parse_globals(text, rest))
        if word == "isolate-rng":
            if not CALLABLE_RE.fullmatch(rest):
                raise _bad(text, "expected isolate-rng pkg.module:Qualified.name")
            return IsolateRngIntervention(target=_not_main(text, rest))
        if word == "seed-rng":
            if not CALLABLE_RE.fullmatch(rest):
                raise _bad(text, "expected seed-rng pkg.module:Qualified.name")
            return SeedRngIntervention(target=_not_main(text, rest))
        if word == "isolate-writes":
            if not CALLABLE_RE.fullmatch(rest):
                raise _bad(text, "expected isolate-writes pkg.module:Qualified.name")
            return IsolateWritesIntervention(target=_not_main(text, rest))
        if word == "copy-returns":
            if not CALLABLE_RE.fullmatch(rest):
                raise _bad(text, "expected copy-returns pkg.module:Qualified.name")
            return CopyReturnsIntervention(target=_not_main(text, rest))
        if word == "as-stated":
            target, eq, said = rest.partition("=")
            if not eq or not said or not CALLABLE_RE.fullmatch(target):
                raise _bad(text, "expected as-stated pkg.module:Qualified.name=TEXT")
            return AsStatedIntervention(target=_not_main(text, target), text=said)
        if word == "suppress":
            target, at, scope = rest.partition("@")
            site = scope if at and re.fullmatch(SITE_RE, scope) else None
            if not CALLABLE_RE.fullmatch(target) or (at and scope != "init" and site is None):
                raise _bad(text, "expected suppress pkg.module:Qualified.name[@init|@FILE:LINE]")
            if site is not None:
                return SuppressIntervention(target=_not_main(text, target), site=site)
            return SuppressIntervention(target=_not_main(text, target), scope=scope or "run")
        if word == "thin":
            call, eq, k = rest.rpartition("=")
            target, at, site = call.partition("@")
            if (
                not eq
                or not k.isdigit()
                or not CALLABLE_RE.fullmatch(target)
                or (at and not re.fullmatch(SITE_RE, site))
            ):
                raise _bad(text, "expected thin pkg.module:Qualified.name[@FILE:LINE]=K")
            return SuppressIntervention(
                target=_not_main(text, target), site=site or None, every=int(k)
            )
        if word == "replace":
            target, eq, repl = rest.partition("=")
            if not eq or not CALLABLE_RE.fullmatch(target) or not CALLABLE_RE.fullmatch(repl):
                raise _bad(text, "expected replace pkg.mod:Qual.name=pkg2.mod:func")
            return ReplaceIntervention(target=_not_main(text, target), replacement=repl)
        if word == "patch":
            if not rest:
                raise _bad(text, "expected patch FILE.diff")
            return PatchIntervention(path=rest)
        if word == "revert":
            paths = [p.strip() for p in rest.split(",") if p.strip()]
            if not paths or any(Path(p).is_absolute() or ".." in Path(p).parts for p in paths):
                raise _bad(text, "expected revert path[,path...] of repository-relative files")
            return RevertIntervention(paths=paths)
    except ValidationError as exc:
        raise _bad(text, exc.errors()[0]["msg"]) from None
    raise _bad(text, f"unknown kind {word!r}" if word else "empty")


def _parse_attrs(text: str, rest: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in [p.strip() for p in rest.split(",") if p.strip()]:
        key, eq, raw = part.partition("=")
        if not eq or not ATTR_RE.fullmatch(key) or key.startswith("__main__:"):
            raise _bad(text, "expected restore-attrs pkg.mod:Class.attr=VALUE[,...] (VALUE JSON)")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise _bad(text, f"{raw!r} is not a JSON value") from None
        if isinstance(value, dict | list):
            raise _bad(text, "a restored attribute's value is a JSON scalar")
        out[key] = value
    if not out:
        raise _bad(text, "expected restore-attrs pkg.mod:Class.attr=VALUE[,...]")
    return out


def _parse_globals(text: str, rest: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    form = "expected restore-globals pkg.mod.NAME=VALUE[,...] (VALUE a JSON scalar)"
    for part in [p.strip() for p in re.split(r",(?=\s*[A-Za-z_][\w.]*=)", rest) if p.strip()]:
        key, eq, raw = part.partition("=")
        if not eq or not GLOBAL_RE.fullmatch(key):
            raise _bad(text, form)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise _bad(text, f"{raw!r} is not a JSON value") from None
        if isinstance(value, dict | list):
            raise _bad(text, form)
        out[key] = value
    if not out:
        raise _bad(text, form)
    return out


def _not_main(text: str, target: str) -> str:
    if target.startswith("__main__:"):
        raise _bad(
            text,
            "a function of the __main__ script cannot be patched: it runs before any "
            "patch could apply; name the module it is defined in",
        )
    return target


def _parse_config(text: str, rest: str) -> ConfigIntervention:
    key, eq, raw = rest.partition("=")
    if not eq and re.fullmatch(r"--[A-Za-z0-9][\w.-]*", key):
        return ConfigIntervention(key=key, value=None)  # a bare flag (argparse store_true)
    if not eq or not key:
        raise _bad(text, "expected config a.b.c=VALUE or config --flag=VALUE")
    if key.startswith("--"):
        if not re.fullmatch(r"--[A-Za-z0-9][\w.-]*", key):
            raise _bad(text, f"{key!r} is not a launch flag")
        return ConfigIntervention(key=key, value=raw)
    if not all(re.fullmatch(r"[\w-]+", part) for part in key.split(".")):
        raise _bad(text, f"{key!r} is not a dotted key path (a.b.c)")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw  # a bare word: the string itself
    return ConfigIntervention(key=key, value=value)


def _forms(iv: Intervention) -> tuple[str, str]:
    """Its text form and its description, side by side so that a new kind gets both."""
    match iv:
        case EnvIntervention(key=k, value=None):
            return f"unset {k}", f"unset {k}"
        case EnvIntervention(key=k, value=v):
            return f"env {k}={v}", f"set {k}={v}"
        case ConfigIntervention(key=k, value=None) if iv.is_flag:
            return f"config {k}", f"launch flag {k} given"
        case ConfigIntervention(key=k, value=v) if iv.is_flag:
            return f"config {k}={v}", f"launch flag {k}={v}"
        case ConfigIntervention(key=k, value=v):
            return f"config {k}={json.dumps(v)}", f"config key {k} = {json.dumps(v)}"
        case DropIntervention(key=k):
            return f"drop {k}", f"launch flag {k} removed"
        case SetIntervention(name=n, value=v):
            return f"set {n}={json.dumps(v)}", f"setting {n} = {json.dumps(v)}"
        case IsolateRngIntervention(target=t):
            return (
                f"isolate-rng {t}",
                f"{t} run under saved-and-restored generator state (its draws do not reach "
                "the run's streams)",
            )
        case SeedRngIntervention(target=t):
            return (
                f"seed-rng {t}",
                f"{t} run under every generator seeded from its call's plain arguments, and "
                "put back after it (its draws no longer depend on the process or the order "
                "it runs in)",
            )
        case IsolateWritesIntervention(target=t):
            return (
                f"isolate-writes {t}",
                f"{t} run with the tensors it is handed put back after it (its writes do not "
                "reach training)",
            )
        case CopyReturnsIntervention(target=t):
            return (
                f"copy-returns {t}",
                f"{t} run as it is, its callers handed copies of the tensors it returns",
            )
        case AsStatedIntervention(target=t, text=said):
            return (
                f"as-stated {t}={said}",
                f"{t} run as it is, returning what the text {said!r} states where it is "
                "handed that text",
            )
        case RestoreStateIntervention(parts=ps):
            return (
                "restore-state " + ",".join(ps),
                f"{', '.join(ps)} put back after the resume as the saving process had them",
            )
        case OutplaceIntervention(site=f):
            return f"outplace {f}", f"the in-place torch calls at {f} run out of place"
        case FillEmptyIntervention(site=f):
            return f"fill-empty {f}", f"the tensors {f} allocates uninitialised are zeroed"
        case PinSeedIntervention(site=f, values=vs):
            said = ", ".join(map(str, vs))
            return (
                f"pin-seed {f}={','.join(map(str, vs))}",
                f"the seedings at {f} given {said}, in order",
            )
        case RestoreAttrsIntervention(attrs=a):
            text = ",".join(f"{k}={json.dumps(v)}" for k, v in a.items())
            said = ", ".join(f"{k} = {json.dumps(v)}" for k, v in a.items())
            return f"restore-attrs {text}", f"after load_state_dict: {said}"
        case SyncGradsIntervention(params=ps):
            return (
                "sync-grads " + ",".join(ps),
                f"the gradients of {', '.join(ps)} averaged across the ranks as the backward "
                "accumulates them",
            )
        case RestoreGlobalsIntervention(values=vs):
            text = ",".join(f"{k}={json.dumps(v)}" for k, v in vs.items())
            said = ", ".join(f"{k} = {json.dumps(v)}" for k, v in vs.items())
            return f"restore-globals {text}", f"where the resume is declared: {said}"
        case TieParamsIntervention():
            said = "; ".join(" and ".join(g) for g in iv.groups)
            return (
                f"tie-params {iv.text()}",
                f"{said} made one tensor before any optimizer takes them",
            )
        case SuppressIntervention(target=t, site=site, every=int(k)):
            at = f"@{site}" if site else ""
            where = f" where {site} calls it" if site else ""
            return (
                f"thin {t}{at}={k}",
                f"{t}{where} let through once in every {k} calls (the last of each {k}; the "
                "others return None)",
            )
        case SuppressIntervention(target=t, site=str(site)):
            return f"suppress {t}@{site}", f"{t} suppressed where {site} calls it (returns None)"
        case SuppressIntervention(target=t, scope="init"):
            return f"suppress {t}@init", f"{t} suppressed before the first step (returns None)"
        case SuppressIntervention(target=t):
            return f"suppress {t}", f"{t} suppressed (returns None)"
        case ReplaceIntervention(target=t, replacement=r):
            return f"replace {t}={r}", f"{t} replaced by {r}"
        case PolicyIntervention(policy=p):
            return p, f"policy {p} ({POLICY_HELP[p]})"
        case PatchIntervention(path=f):
            return f"patch {f}", f"the diff {f} applied to a copy of the run's tree"
        case RevertIntervention(paths=ps):
            return "revert " + ",".join(ps), f"{', '.join(ps)} reverted to the other run's revision"
    raise AssertionError(iv)  # pragma: no cover - the union is closed


def to_text(iv: Intervention) -> str:
    """The text form :func:`parse_intervention` reads back to the same intervention."""
    return _forms(iv)[0]


def describe(iv: Intervention) -> str:
    """The one thing changed, as a reviewer reads it in the discriminator table."""
    return _forms(iv)[1]


def check_untrusted(iv: Intervention) -> Intervention:
    """Refuse, for a caller that may not run code of its choosing, what would let it.

    A variable that makes a process load code (``LD_PRELOAD``, ``PYTHONPATH``, ...) or
    drives this project's own machinery (``TRIAGE_*``), and a replacement taken from the
    standard library (``os:system``), are refused; the rest changes data, not code.
    """
    if isinstance(iv, EnvIntervention) and (iv.key in CODE_ENV or iv.key.startswith("TRIAGE_")):
        raise InputError(f"intervention on {iv.key} is refused here: it selects code to run")
    if isinstance(iv, ReplaceIntervention):
        top = iv.replacement.split(":", 1)[0].split(".", 1)[0]
        if top in sys.stdlib_module_names:
            raise InputError(
                f"replacement {iv.replacement!r} is refused here: a standard-library "
                "function is not a fix; name one from the case's own code"
            )
    return iv


# -- applying them -----------------------------------------------------------------------------
def _pick_run(case: Case, run: str) -> tuple[RunSpec, RunSpec]:
    """(the run to rerun, the other one) by 'a'/'b' or by name."""
    a, b = case.run_a, case.run_b
    for key, pair in (("a", (a, b)), ("b", (b, a)), (a.name, (a, b)), (b.name, (b, a))):
        if run == key:
            return pair
    raise InputError(f"unknown run {run!r}: 'a', 'b', {a.name!r} or {b.name!r}")


def _config_arg(argv: list[str]) -> tuple[int, str, str] | None:
    """(index, prefix, path) of the JSON config a command names, or None."""
    for i, a in enumerate(argv):
        for flag in CONFIG_FLAGS:
            if a == flag and i + 1 < len(argv):
                return i + 1, "", argv[i + 1]
            if a.startswith(flag + "="):
                return i, flag + "=", a[len(flag) + 1 :]
    named = [(i, a) for i, a in enumerate(argv) if a.endswith(".json") and not a.startswith("-")]
    if len(named) > 1:
        raise InputError(
            f"the command names {len(named)} JSON files ({', '.join(a for _, a in named[:3])}): "
            "name the config with --deepspeed_config so it can be told apart"
        )
    return (named[0][0], "", named[0][1]) if named else None


def _set_key(doc: Any, key: str, value: Any, where: Path) -> None:
    *path, last = key.split(".")
    node = doc
    for part in path:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict):
            node = node.setdefault(part, {})
        else:
            raise InputError(f"config key {key!r}: {part!r} is inside a non-object in {where}")
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise InputError(f"config key {key!r}: its parent is not an object in {where}")


def _with_config(run: RunSpec, keys: list[ConfigIntervention], scratch: Path) -> RunSpec:
    """The run with each command's JSON config replaced by a changed copy under ``scratch``."""
    launch: list[list[str]] = []
    found = False
    for argv in run.launch:
        argv = list(argv)
        spot = _config_arg(argv)
        if spot is not None:
            i, prefix, name = spot
            if "{" in name:  # {out}: written by an earlier command of the run
                raise InputError(
                    f"config file {name!r} is made by the run itself: it cannot be changed before"
                )
            src = Path(run.cwd or ".") / name
            try:
                doc = json.loads(src.read_text())
            except OSError as exc:
                raise InputError(
                    f"config file {src} named in the run's argv: {exc.strerror}"
                ) from None
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"config file {src} is not JSON: {exc.msg} (line {exc.lineno})"
                ) from None
            for iv in keys:
                _set_key(doc, iv.key, iv.value, src)
            text = json.dumps(doc, indent=1, sort_keys=True)
            copy = scratch / hashlib.sha256(text.encode()).hexdigest()[:12] / Path(name).name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(text)
            argv[i] = prefix + str(copy)
            found = True
        launch.append(argv)
    if not found:
        raise InputError(
            f"run {run.name!r} names no JSON config file in its argv ({', '.join(CONFIG_FLAGS)} "
            "or one *.json argument): a config key cannot be changed"
        )
    return run.model_copy(update={"launch": launch})


def _with_flag(argv: list[str], flag: str, value: str | None) -> list[str]:
    """``--flag=value`` set or added; a bare ``--flag`` (value None) added when absent."""
    out = list(argv)
    if value is None:
        return out if flag in out else [*out, flag]
    for i, a in enumerate(out):
        if a.startswith(flag + "="):
            out[i] = f"{flag}={value}"
            return out
        if a == flag:
            has_value = i + 1 < len(out) and not out[i + 1].startswith("--")
            out[i : i + 2 if has_value else i + 1] = [f"{flag}={value}"]
            return out
    return [*out, f"{flag}={value}"]


def _without_flag(argv: list[str], flag: str) -> list[str]:
    """``--flag``, ``--flag=value`` and ``--flag value`` removed (a value is the next word when
    it does not start with a dash)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith(flag + "="):
            i += 1
            continue
        if a == flag:
            i += 2 if i + 1 < len(argv) and not argv[i + 1].startswith("-") else 1
            continue
        out.append(a)
        i += 1
    return out


def patched_copy(run: RunSpec, diff: Path, workspace: Path) -> Path:
    """A throwaway copy of the run's tree (its repository's work tree, else its working
    directory) with the diff applied (``git apply``, paths relative to that root, -p1); made
    under ``<workspace>/interventions/patched``, once per diff and tree."""
    import shutil

    import git

    from .process import run_process

    cwd = Path(run.cwd or ".").resolve()
    try:
        root = Path(git.Repo(cwd, search_parent_directories=True).working_tree_dir).resolve()
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        root = cwd
    src = diff if diff.is_absolute() else cwd / diff
    try:
        text = src.read_bytes()
    except OSError as exc:
        raise InputError(f"patch {diff}: {exc.strerror}") from None
    ws = Path(workspace).resolve()
    key = hashlib.sha256(text + _tree_digest(root, ws).encode()).hexdigest()[:12]
    dest = ws / "interventions" / "patched" / key
    if (dest / ".triage-applied").is_file():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    skip = {".git", "__pycache__"}
    shutil.copytree(
        root,
        dest,
        ignore=lambda d, names: [n for n in names if n in skip or (Path(d) / n).resolve() == ws],
    )
    # outside every repository (a ceiling at the copy), git apply patches plain files
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(ws)),
        "GIT_CEILING_DIRECTORIES": str(dest.parent),
    }
    logs = ws / "interventions" / "patched" / f"{key}.apply"
    done = run_process(
        ["git", "apply", "-p1", str(src.resolve())],
        cwd=dest,
        env=env,
        timeout_s=120,
        stdout_path=f"{logs}.out",
        stderr_path=f"{logs}.err",
    )
    if done.returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        said = Path(f"{logs}.err").read_text(errors="replace").strip().splitlines()
        raise InputError(
            f"patch {diff} does not apply to run {run.name!r}'s tree: "
            f"{said[0] if said else 'git apply failed'}"
        )
    (dest / ".triage-applied").write_text(str(src))
    return dest


def _tree_digest(root: Path, skip: Path) -> str:
    """Content digest of a source directory (git's and the workspace's files left out).

    A file above MAX_HASHED_BYTES (a checkpoint, a data shard) counts by size and mtime.
    """
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if {".git", "__pycache__"} & set(rel.parts) or p.is_relative_to(skip) or not p.is_file():
            continue
        st = p.stat()
        big = st.st_size > MAX_HASHED_BYTES
        h.update(str(rel).encode() + b"\0")
        h.update(f"{st.st_size}:{st.st_mtime_ns}".encode() if big else p.read_bytes())
    return h.hexdigest()[:16]


def _in_source_dir(run: RunSpec, source_dir: Path) -> RunSpec:
    """The run launched from a prepared copy of its checkout (or of its working directory).

    The run's working directory, and argv/env paths inside the checkout, map to the same
    place in the copy: a copy of a repository's work tree keeps its layout.
    """
    import git

    src = source_dir.resolve()
    if not src.is_dir():
        raise InputError(f"source directory {source_dir} does not exist")
    cwd = Path(run.cwd or ".").resolve()
    try:
        root = Path(git.Repo(cwd, search_parent_directories=True).working_tree_dir).resolve()
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        root = cwd
    new_cwd = src / cwd.relative_to(root)
    if not new_cwd.is_dir():
        raise InputError(f"source directory {src} has no {cwd.relative_to(root)} (the run's cwd)")

    def move(text: str) -> str:
        return str(src / Path(text).relative_to(root)) if Path(text).is_relative_to(root) else text

    return run.model_copy(
        update={
            "cwd": str(new_cwd),
            "launch": [[move(a) if a.startswith("/") else a for a in argv] for argv in run.launch],
            "env": {k: move(v) if v.startswith("/") else v for k, v in run.env.items()},
        }
    )


def plan(
    run: RunSpec,
    interventions: list[Intervention],
    workspace: Path,
    source_dir: Path | None = None,
) -> tuple[RunSpec, list[str], LaunchChanges]:
    """The changed run, its policies and launch changes. Nothing is launched; changed
    config files are written under ``<workspace>/interventions``."""
    scratch = Path(workspace) / "interventions"
    if not interventions and source_dir is None:
        raise InputError(
            "no intervention given: name one, e.g. --intervene 'env OMP_NUM_THREADS=1'"
        )
    reverts = [iv for iv in interventions if isinstance(iv, RevertIntervention)]
    if reverts and source_dir is None:
        raise InputError(
            "a revert is applied by the fix check, which prepares the reverted checkout; "
            "give that checkout as the source directory"
        )
    targets = [
        iv.key
        for iv in interventions
        if isinstance(iv, EnvIntervention | ConfigIntervention | DropIntervention)
    ]
    targets += [iv.name for iv in interventions if isinstance(iv, SetIntervention)]
    targets += [
        f"pin-seed {iv.site}" for iv in interventions if isinstance(iv, PinSeedIntervention)
    ]
    targets += [
        f"outplace {iv.site}" for iv in interventions if isinstance(iv, OutplaceIntervention)
    ]
    targets += [
        f"restore-state {p}"
        for iv in interventions
        if isinstance(iv, RestoreStateIntervention)
        for p in iv.parts
    ]
    targets += [
        k for iv in interventions if isinstance(iv, RestoreGlobalsIntervention) for k in iv.values
    ]
    targets += [
        f"sync-grads {n}"
        for iv in interventions
        if isinstance(iv, SyncGradsIntervention)
        for n in iv.params
    ]
    targets += [
        f"tie-params {iv.text()}" for iv in interventions if isinstance(iv, TieParamsIntervention)
    ]
    targets += [
        iv.target
        for iv in interventions
        if isinstance(
            iv,
            SuppressIntervention
            | ReplaceIntervention
            | IsolateRngIntervention
            | SeedRngIntervention
            | IsolateWritesIntervention
            | AsStatedIntervention
            | CopyReturnsIntervention,
        )
    ]
    targets += [
        p.target
        for iv in interventions
        if isinstance(iv, RestoreAttrsIntervention)
        for p in iv.patches()
    ]
    dup = next((t for t in targets if targets.count(t) > 1), None)
    if dup is not None:
        raise InputError(f"{dup} is changed twice: each intervention changes one thing once")
    changes = LaunchChanges(described=[describe(iv) for iv in interventions])
    if source_dir is not None:
        run = _in_source_dir(run, source_dir)
        changes.source_digest = _tree_digest(Path(source_dir).resolve(), Path(workspace).resolve())
    keys = [iv for iv in interventions if isinstance(iv, ConfigIntervention) and not iv.is_flag]
    if keys:
        run = _with_config(run, keys, scratch / "configs")
    policies: list[str] = []
    launch = [list(a) for a in run.launch]
    for iv in interventions:
        match iv:
            case EnvIntervention(key=k, value=v):
                changes.env[k] = v
            case ConfigIntervention(key=k, value=v) if iv.is_flag:
                launch = [_with_flag(argv, k, None if v is None else str(v)) for argv in launch]
            case DropIntervention(key=k):
                launch = [_without_flag(argv, k) for argv in launch]
            case SetIntervention(name=n, value=v):
                changes.settings[n] = v
            case PinSeedIntervention(site=f, values=vs):
                changes.seeds.append(SeedPin(site=f, values=vs))
            case OutplaceIntervention(site=f):
                changes.outplace.append(f)
            case FillEmptyIntervention(site=f):
                changes.fill_empty.append(f)
            case RestoreStateIntervention(parts=ps):
                changes.restore_state += ps
            case IsolateRngIntervention(target=t):
                changes.patches.append(FunctionPatch(target=t, isolate_rng=True))
            case SeedRngIntervention(target=t):
                changes.patches.append(FunctionPatch(target=t, seed_rng=True))
            case IsolateWritesIntervention(target=t):
                changes.patches.append(FunctionPatch(target=t, isolate_writes=True))
            case AsStatedIntervention(target=t, text=said):
                changes.patches.append(FunctionPatch(target=t, as_stated=said))
            case CopyReturnsIntervention(target=t):
                changes.patches.append(FunctionPatch(target=t, copy_return=True))
            case RestoreAttrsIntervention():
                changes.patches += iv.patches()
            case RestoreGlobalsIntervention(values=vs):
                changes.restore_globals.update(vs)
            case SyncGradsIntervention(params=ps):
                changes.sync_grads += ps
            case TieParamsIntervention():
                changes.tie_params.append(iv.text())
            case SuppressIntervention(target=t, scope=scope, site=site, every=every):
                changes.patches.append(FunctionPatch(target=t, scope=scope, site=site, every=every))
            case ReplaceIntervention(target=t, replacement=r):
                changes.patches.append(FunctionPatch(target=t, replacement=r))
            case PolicyIntervention(policy=p):
                policies.append(p)
    for iv in interventions:
        if isinstance(iv, DropIntervention) and not any(
            a == iv.key or a.startswith(iv.key + "=") for argv in run.launch for a in argv
        ):
            raise InputError(f"run {run.name!r} is not launched with {iv.key}: nothing to drop")
    return run.model_copy(update={"launch": launch}), policies, changes


class PreparedRerun(BaseModel):
    """A rerun checked and planned, not yet launched."""

    run: RunSpec
    label: str
    policies: list[str]
    changes: LaunchChanges


def prepare(
    case: Case,
    run: str,
    interventions: list[Intervention],
    *,
    workspace: Path,
    source_dir: Path | None = None,
) -> PreparedRerun:
    """Check and plan a rerun; InputError for anything that cannot be applied."""
    spec, _other = _pick_run(case, run)
    diffs = [iv for iv in interventions if isinstance(iv, PatchIntervention)]
    if diffs:
        if source_dir is not None or len(diffs) > 1:
            raise InputError("one patch a rerun, and not with a revert: give one diff")
        source_dir = patched_copy(spec, Path(diffs[0].path), Path(workspace))
    rest = [iv for iv in interventions if not isinstance(iv, PatchIntervention)]
    changed, policies, changes = plan(spec, rest, Path(workspace), source_dir)
    tag = json.dumps([to_text(iv) for iv in interventions] + [changes.source_digest])
    label = "intervene-" + hashlib.sha256(tag.encode()).hexdigest()[:10]
    return PreparedRerun(run=changed, label=label, policies=policies, changes=changes)


def launch(
    prepared: PreparedRerun,
    *,
    workspace: Path,
    timeout_s: float = 600.0,
    progress: Progress | None = None,
    reuse: bool = True,
) -> RunOutcome:
    return materialize(
        prepared.run,
        Path(workspace),
        prepared.label,
        policies=prepared.policies,
        timeout_s=timeout_s,
        reuse=reuse,
        progress=progress,
        changes=prepared.changes,
    )


def rerun(
    case: Case,
    run: str,
    interventions: list[Intervention],
    *,
    workspace: Path,
    timeout_s: float = 600.0,
    source_dir: Path | None = None,
    progress: Progress | None = None,
    reuse: bool = True,
) -> RunOutcome:
    """Rerun one run of the case, uninstrumented, with the interventions applied.

    ``source_dir`` runs it from a prepared copy of its checkout (how a ``revert`` is
    applied: the fix check builds the copy). Cached by everything that changed. Raises
    InputError before launching for what cannot be applied; a rerun that starts and fails
    comes back with ``ok`` false.
    """
    prepared = prepare(case, run, interventions, workspace=workspace, source_dir=source_dir)
    return launch(
        prepared, workspace=workspace, timeout_s=timeout_s, progress=progress, reuse=reuse
    )


# -- comparing ---------------------------------------------------------------------------------
class StepMatch(BaseModel):
    all_match: bool = Field(description="every step of every rank has the same metric bits")
    first_differing_step: int | None = None
    steps: int = Field(description="steps both runs hold, compared")
    ranks: list[int] = Field(default_factory=list, description="ranks compared")
    note: str = ""

    def said(self) -> str:
        """One line: 'all 41 steps match' / 'first differing step 3'."""
        if self.all_match:
            return f"all {self.steps} steps match"
        if self.first_differing_step is not None:
            return f"first differing step {self.first_differing_step}"
        return f"not a match: {self.note}"


def compare_runs(case: Case, a: RunOutcome, b: RunOutcome) -> StepMatch:
    """Compare two outcomes' metric bits over every step and rank.

    A rank or a step that one run has and the other lacks is never "all match", nor is a
    failed run, a run without metrics, or a patch that never took effect.
    """
    for o in (a, b):
        if not o.ok:
            return StepMatch(all_match=False, steps=0, note=f"run {o.run} failed: {o.error}")
    try:
        d = diff_metrics(load_metrics(a.metrics or ""), load_metrics(b.metrics or ""))
    except InputError as exc:
        return StepMatch(all_match=False, steps=0, note=f"metrics cannot be compared: {exc}")
    base = {"steps": len(d.common_steps), "ranks": d.ranks}
    if d.first_step is not None:
        m = d.mismatches[0]
        note = f"rank {m.rank} {m.metric} differs first at step {d.first_step}"
        return StepMatch(all_match=False, first_differing_step=d.first_step, note=note, **base)
    if not d.complete:
        return StepMatch(
            all_match=False, note=f"equal where both have data, but {d.gaps()}", **base
        )
    if not d.common_steps:
        return StepMatch(all_match=False, note="the runs share no step", **base)
    idle = untaken_patches(b) + untaken_patches(a)
    if idle:
        return StepMatch(all_match=False, note="; ".join(idle), **base)
    steps = d.common_steps
    return StepMatch(all_match=True, note=f"steps {steps[0]}..{steps[-1]}, ranks {d.ranks}", **base)


def untaken_patches(o: RunOutcome) -> list[str]:
    """A patch that no process applied, or whose function no process called, tested nothing."""
    said = []
    for target, events in o.patches.items():
        if not events.get("patched"):
            said.append(
                f"{target} was never patched: no process of run {o.run} imported its module"
            )
        elif not events.get("called"):
            said.append(f"{target} was patched but never called in run {o.run}")
    return said


# -- recording ---------------------------------------------------------------------------------
class InterventionResult(BaseModel):
    """A rerun with interventions, compared with the other run's baseline, and its evidence."""

    run: str = Field(description="the run the interventions were applied to")
    compared_with: str
    interventions: list[str] = Field(description="their text forms")
    changed: list[str] = Field(description="the one thing each changed, said")
    match: StepMatch
    line: str = Field(description="'all 41 steps match' / 'first differing step 3'")
    result: EvidenceResult
    outcome: RunOutcome
    baseline: RunOutcome
    evidence_id: str


def _result(m: StepMatch, ok: bool, hypotheses: list[str]) -> EvidenceResult:
    if not ok:
        return EvidenceResult.error
    if not hypotheses:
        return EvidenceResult.observed  # a measurement; what it supports is the caller's to say
    if m.all_match:
        return EvidenceResult.supported
    return (
        EvidenceResult.refuted
        if m.first_differing_step is not None
        else EvidenceResult.inconclusive
    )


def intervene(
    case: Case,
    run: str,
    interventions: list[Intervention],
    *,
    ledger: Ledger,
    hypotheses: list[str] | None = None,
    timeout_s: float | None = None,
    source_dir: Path | None = None,
    progress: Progress | None = None,
) -> InterventionResult:
    """Rerun ``run`` with the interventions, compare with the other run's baseline, record it.

    The evidence is a ``rerun``: supported when it names hypotheses and every step and rank
    matches, refuted when a step still differs, inconclusive when the comparison is partial,
    error when a run failed, observed when it names no hypothesis.
    """
    hyps = list(hypotheses or [])
    ledger.require_hypotheses(hyps)
    limit = min(timeout_s or case.timeout_s, case.timeout_s)
    ws = Path(ledger.workspace)
    if run == "both":
        # A repeat has nothing declared to remove: the same change in both runs pins an
        # input neither controlled, and the two reruns are compared with each other.
        spec, other = case.run_b, case.run_a
        pa = prepare(case, "a", interventions, workspace=ws, source_dir=source_dir)
        prepared = prepare(case, "b", interventions, workspace=ws, source_dir=source_dir)
        base = launch(pa, workspace=ws, timeout_s=limit, progress=progress)
    else:
        spec, other = _pick_run(case, run)
        # checked before anything runs: bad input never costs a baseline
        prepared = prepare(case, run, interventions, workspace=ws, source_dir=source_dir)
        base = materialize(other, ws, "baseline", timeout_s=case.timeout_s, progress=progress)
    out = launch(prepared, workspace=ws, timeout_s=limit, progress=progress)
    base, out = completed_despite_exit(base, out), completed_despite_exit(out, base)
    m = compare_runs(case, base, out)
    result = _result(m, base.ok and out.ok, hyps)
    changed = [describe(iv) for iv in interventions]
    said_run = "both runs" if run == "both" else f"run {spec.name}"
    against = (
        "compared with each other" if run == "both" else f"against run {other.name}'s baseline"
    )
    summary = (
        f"{said_run} rerun uninstrumented with {'; '.join(changed) or 'its prepared source'}, "
        f"{against}: {m.said()}"
        + (f" ({m.note})" if m.note and not m.said().endswith(m.note) else "")
    )
    back = put_back_said(out.out_dir) if out.out_dir else ""
    if back:
        summary += f"; put back in the resumed process: {back}"
    arts = []
    if out.ok and out.metrics and Path(out.metrics).exists():
        files = (
            [Path(out.metrics)]
            if Path(out.metrics).is_file()
            else sorted(Path(out.metrics).glob("metrics_rank*.jsonl"))
        )
        arts = [ledger.artifact(f, role=f"metrics {spec.name} rerun") for f in files]
    data = RerunData(
        interventions=[to_text(iv) for iv in interventions],
        changed=changed,
        applied_to="both" if run == "both" else spec.name,
        compared_with=other.name,
        source_dir=str(source_dir) if source_dir else None,
        match=m.model_dump(mode="json"),
        first_step=m.first_differing_step,
        common_steps=m.steps,
        error=out.error or base.error,
    )
    ev = ledger.add_evidence(
        rerun_evidence(out, data, hypotheses=hyps, result=result, summary=summary, artifacts=arts)
    )
    return InterventionResult(
        run="both" if run == "both" else spec.name,
        compared_with=other.name,
        interventions=[to_text(iv) for iv in interventions],
        changed=changed,
        match=m,
        line=m.said(),
        result=result,
        outcome=out,
        baseline=base,
        evidence_id=ev.id,
    )


def put_back_said(out_dir: str) -> str:
    """What a restore put back in a resumed process, from the reports it leaves in the run's
    directory: each object restore-cursors or restore-attrs set (and the attributes), each
    part restore-state put back. Empty when nothing was."""
    from .policies import RESTORED
    from .restore_state import REPORT

    said: list[str] = []
    for pattern, fmt in ((f"**/*{RESTORED}", "cursor"), (f"**/{REPORT}", "part")):
        for f in sorted(Path(out_dir).glob(pattern)):
            try:
                got = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            for name, v in sorted(got.items()) if isinstance(got, dict) else []:
                if not isinstance(v, dict):
                    continue
                if fmt == "cursor" and v.get("attrs"):
                    said.append(f"{name} ({', '.join(map(str, v['attrs'][:6]))})")
                elif fmt == "part" and v.get("what"):
                    said.append(f"{name}: {v['what']}")
    return "; ".join(dict.fromkeys(said))[:600]

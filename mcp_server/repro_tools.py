"""Tools over the reproducers: list the templates; generate a reproducer from a recorded
finding or hypothesis, and launch one by id.

A reproducer is launched only by the id the generator gave it: the file it wrote and the
ledger recorded, never a path or a command from the caller. Its result is execution
evidence; ``update_hypothesis`` cites that evidence to move a hypothesis to supported or
refuted.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from reproducers.generator import GeneratedReproducer, generate, spec_of
from reproducers.launcher import EnvPolicy, launch
from reproducers.params import TEMPLATES, path_fields, template_info
from reproducers.replay import ReplayPolicy, replay_dump
from triage_agent.errors import InputError
from triage_agent.records import Evidence, Finding, ReproducerSpec

from .security import MAX_LIST_ITEMS, MAX_NAME_CHARS, MAX_PATH_CHARS, Workspace
from .spec import ID_PATTERN, In, Progress


class ListTemplatesIn(In):
    name: str | None = Field(default=None, max_length=MAX_NAME_CHARS, description="one template")


class TemplateOut(BaseModel):
    name: str
    tests: str = Field(description="what the template compares")
    supported_means: str = Field(description="what supported=true means for the hypothesis")
    needs_gpu: str
    uses_deepspeed: bool
    ranks: int
    default_timeout_s: float
    params_schema: dict[str, Any] = Field(description="JSON schema of its parameters")


class TemplatesOut(BaseModel):
    templates: list[TemplateOut]


def list_templates(ws: Workspace, args: ListTemplatesIn, progress: Progress) -> TemplatesOut:
    """List the reproducer templates: what each compares, what a supported result means,
    whether it needs a GPU or DeepSpeed, and the JSON schema of its parameters (for the
    'reproducer' of a hypothesis)."""
    from reproducers.params import template_info

    infos = [template_info(args.name)] if args.name else list(TEMPLATES.values())
    return TemplatesOut(
        templates=[TemplateOut(**t.model_dump(), params_schema=t.params_schema()) for t in infos]
    )


class GenerateIn(In):
    finding: str | None = Field(
        default=None, max_length=64, pattern=ID_PATTERN, description="a recorded finding id"
    )
    hypothesis: str | None = Field(
        default=None,
        max_length=64,
        pattern=ID_PATTERN,
        description="a recorded hypothesis id that carries a reproducer spec",
    )
    reproducer: ReproducerSpec | None = Field(
        default=None, description="a template and its parameters (see list_templates)"
    )

    @model_validator(mode="after")
    def _one_source(self) -> GenerateIn:
        given = [x for x in (self.finding, self.hypothesis, self.reproducer) if x is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of finding, hypothesis or reproducer")
        if self.reproducer is not None and len(json.dumps(self.reproducer.params)) > 20_000:
            raise ValueError("reproducer params larger than 20000 characters of JSON")
        return self


def generate_reproducer(ws: Workspace, args: GenerateIn, progress: Progress) -> GeneratedReproducer:
    """Write a small standalone reproducer program from a finding's template (or a
    hypothesis' reproducer spec, or an explicit template + parameters) into the workspace and
    record it. The same spec always gives the same id (R- + sha256 of the program)."""
    st = ws.ledger.state()
    source: Any
    if args.finding is not None:
        source = st.findings.get(args.finding)
        if source is None:
            raise InputError(f"no finding {args.finding!r} in the ledger")
        if source.reproducer is None:
            raise InputError(
                f"finding {args.finding} maps to no reproducer template: give 'reproducer' "
                "(a template from list_templates and its parameters) instead"
            )
    elif args.hypothesis is not None:
        source = st.hypotheses.get(args.hypothesis)
        if source is None:
            raise InputError(f"no hypothesis {args.hypothesis!r} in the ledger")
    else:
        source = args.reproducer
    spec = _contained_paths(ws, spec_of(source))
    # a finding keeps its id on the reproducer; a hypothesis' spec renders the same as itself
    source = source.model_copy(update={"reproducer": spec}) if isinstance(source, Finding) else spec
    ws.output_dir("reproducers")
    return generate(source, ws.ledger.workspace, case=ws.case, ledger=ws.ledger)


def _contained_paths(ws: Workspace, spec: ReproducerSpec) -> ReproducerSpec:
    """A template's import directories must lie inside the workspace or the case's source
    roots: a reproducer imports and runs code from them."""
    params = dict(spec.params)
    for name in path_fields(template_info(spec.template).params_model):
        given = params.get(name)
        if isinstance(given, list):
            params[name] = [
                str(ws.path(p, must_exist=True)) if isinstance(p, str) else p for p in given
            ]
    return spec.model_copy(update={"params": params})


class LaunchIn(In):
    id: str = Field(pattern=r"^R-[0-9a-f]{16}$", description="a generated reproducer's id")
    hypotheses: list[str] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS, description="hypotheses it tests"
    )
    ranks: int = Field(default=1, ge=1, le=8, description="processes (torchrun/deepspeed)")
    launcher: Literal["python", "torchrun", "deepspeed"] = "python"
    timeout_s: float | None = Field(
        default=None, gt=0, le=3600, description="default: the template's own timeout"
    )
    deterministic: bool = Field(
        default=False, description="set the deterministic environment (cuBLAS workspace, ...)"
    )
    threads: int | None = Field(default=1, ge=1, le=256, description="OMP/MKL threads")


def launch_reproducer(ws: Workspace, args: LaunchIn, progress: Progress) -> Evidence:
    """Run a generated, recorded reproducer by id (never a path or a command), with a
    timeout, captured and capped output, a controlled environment and provenance. Its result
    is execution evidence for the named hypotheses: cite its id in update_hypothesis. A file
    changed after generation is refused."""
    ws.require_hypotheses(args.hypotheses)
    ws.output_dir("reproducers")
    progress(0, 1, f"running {args.id}")
    ev = launch(
        args.id,
        ws.ledger.workspace,
        ranks=args.ranks,
        launcher=args.launcher,
        timeout_s=args.timeout_s,
        env_policy=EnvPolicy(deterministic=args.deterministic, threads=args.threads),
        hypotheses=args.hypotheses,
    )
    progress(1, 1, ev.summary)
    return ev


JSONScalar = str | int | float | bool | None


class ReplayIn(In):
    dump: str = Field(max_length=MAX_PATH_CHARS, description="the tracer's dump of the op")
    repeats: int = Field(default=5, ge=1, le=100)
    policy: ReplayPolicy = Field(
        default_factory=ReplayPolicy, description="at most ONE knob changed from the process'"
    )
    nontensor_args: dict[str, JSONScalar | list[JSONScalar]] = Field(
        default_factory=dict, max_length=32, description="non-tensor arguments the dump lacks"
    )
    hypotheses: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)


def replay_op(ws: Workspace, args: ReplayIn, progress: Progress) -> Evidence:
    """Replay one traced op on its captured equal inputs, N times, under one changed policy
    (deterministic algorithms, a side stream, a dtype, a device), and compare the outputs'
    bytes with the recorded ones and among themselves. Recorded as replay evidence
    (observed: which hypothesis it supports depends on the policy changed)."""
    ws.require_hypotheses(args.hypotheses)
    dump = ws.path(args.dump, must_exist=True)
    progress(0, 1, f"replaying {dump.name} x{args.repeats}")
    ev = replay_dump(
        dump,
        ws.ledger.workspace,
        repeats=args.repeats,
        policy=args.policy,
        hypotheses=args.hypotheses,
        nontensor_args=args.nontensor_args or None,
        roots=ws.roots,
    )
    progress(1, 1, ev.summary)
    return ev

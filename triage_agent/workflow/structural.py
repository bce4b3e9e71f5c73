"""An event one run executes and the other does not proposes "this extra call changes
state", tested by suppressing, in the run that makes it, the function the call came from.

The comparison lists such events as first-divergence candidates with their call site
(file:line of the first frame outside torch and the tracer). The function to suppress is
the innermost ``def`` around that line, named ``package.module:Class.method`` from the file's
place under the run's working directory or the interpreter's import path. Candidates that
write state (an optimizer step, an in-place op, a collective) rank first; each function is
proposed once. A call made from the ``__main__`` script, or from module level, names no
function the bootstrap can patch: it is said, not tested. An extra call made during
initialisation is suppressed there alone (``@init``): the same function may be called by
both runs in every step, and dropping those calls too would test something else.
"""

from __future__ import annotations

import ast
import hashlib
import re
import sys
from functools import cache
from pathlib import Path

from pydantic import BaseModel

from ..compare.result import Candidate, CompareResult, Divergence, Producer
from ..records import Case, Classification, Hypothesis, RunSpec
from ..trace_format import INIT_STEP
from .arms import Arm
from .classify import CLASSIFICATION

MAX_CALLS = 3
# ATen ops that draw from a generator (their names without namespace and overload)
DRAWS = frozenset(
    {
        *("bernoulli", "bernoulli_", "dropout", "native_dropout", "feature_dropout"),
        *("rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm"),
        *("normal", "normal_", "uniform_", "multinomial", "exponential_", "geometric_"),
        *("cauchy_", "log_normal_", "random_", "poisson", "rrelu_with_noise"),
    }
)


def is_draw(event: str) -> bool:
    """Whether a traced event (``scope::ns::op.overload``) is an op that draws randomness."""
    op = event.rsplit("::", 1)[-1].split(".", 1)[0]
    return op in DRAWS


class CallSite(BaseModel):
    file: str
    line: int
    module: str | None
    qualname: str | None

    @property
    def target(self) -> str | None:
        if not self.module or not self.qualname:
            return None
        return f"{self.module}:{self.qualname}"


@cache
def _defs(path: str) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function in a file."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    out: list[tuple[int, int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                out.append((child.lineno, child.end_lineno or child.lineno, name))
                walk(child, f"{name}.<locals>.")

    walk(tree, "")
    return out


def _module_name(file: Path, roots: list[Path]) -> str | None:
    for root in sorted(roots, key=lambda r: len(str(r)), reverse=True):
        try:
            rel = file.relative_to(root)
        except ValueError:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts and parts[-1] == "__init__":
            parts.pop()
        if parts and all(p.isidentifier() for p in parts):
            return ".".join(parts)
    return None


@cache
def _overridden(path: str, qualname: str) -> str | None:
    """For a method ``Class.method`` whose class derives from a class of the same file that
    defines ``method`` too, that base's ``Base.method``: what the run would do without the
    override."""
    cls_name, _, method = qualname.rpartition(".")
    if not cls_name or "." in cls_name:
        return None
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def defines(c: ast.ClassDef) -> bool:
        return any(
            isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name == method
            for f in c.body
        )

    todo = [b.id for b in getattr(classes.get(cls_name), "bases", []) if isinstance(b, ast.Name)]
    seen: set[str] = set()
    while todo:
        name = todo.pop(0)
        if name in seen or name not in classes:
            continue
        seen.add(name)
        if defines(classes[name]):
            return f"{name}.{method}"
        todo += [b.id for b in classes[name].bases if isinstance(b, ast.Name)]
    return None


def call_site(caller: str, run_cwd: str | None) -> CallSite | None:
    """Where a call came from, with the function around it named for a patch."""
    file, _, line = caller.rpartition(":")
    if not file or not line.isdigit():
        return None
    path = Path(file).resolve()
    n = int(line)
    inner = [d for d in _defs(str(path)) if d[0] <= n <= d[1]]
    qual = max(inner, key=lambda d: d[0])[2] if inner else None
    if qual is not None and "<locals>" in qual:
        qual = None  # a nested function is not reachable by its qualified name
    roots = [Path(run_cwd).resolve()] if run_cwd else []
    roots += [Path(p).resolve() for p in sys.path if p and Path(p).is_dir()]
    return CallSite(file=str(path), line=n, module=_module_name(path, roots), qualname=qual)


def _scripts(spec: RunSpec) -> set[Path]:
    """The files a run's launch commands execute as a script (``__main__``, never imported
    under the name its file gives: no patch reaches a function in it)."""
    cwd = Path(spec.cwd or ".")
    return {(cwd / arg).resolve() for argv in spec.launch for arg in argv if arg.endswith(".py")}


def with_patch_targets(case: Case | None, candidates: list[Candidate]) -> list[Candidate]:
    """The candidates with ``function`` set for each event one run executes and the other
    does not: the function its call came from, as an intervention names it, resolved under
    the working directory of the run that made the call (what extra_call_arms suppresses)."""
    if case is None:
        return candidates
    out = []
    for c in candidates:
        if c.kind in ("extra", "missing") and c.call_site and c.function is None:
            spec = case.run_b if c.kind == "extra" else case.run_a
            site = call_site(c.call_site, spec.cwd)
            if site is not None and site.target and Path(site.file) not in _scripts(spec):
                c = c.model_copy(update={"function": site.target})
        out.append(c)
    return out


def extra_call_arms(case: Case, candidates: list[Candidate]) -> tuple[list[Arm], list[str]]:
    """Arms for the events only one run executes, and what could not be made an arm."""
    # what changes state (a write, a draw) first, in the order it ran: the first of them in a
    # function names the function's line (a subset drawn before a dropout's mask)
    ordered = sorted(
        candidates, key=lambda c: (not (c.writes_state or is_draw(c.event)), c.step, c.order)
    )
    arms: list[Arm] = []
    said: list[str] = []
    seen: set[str] = set()
    blind: list[str] = []
    # A line from which each run executes events the other does not (another parameter
    # grouping, another layer count) is a call both runs make: what differs is what the call
    # does, and suppressing it in one run tests nothing about the difference.
    sites = {
        k: {c.call_site for c in ordered if c.kind == k and c.call_site}
        for k in ("extra", "missing")
    }
    shared = sites["extra"] & sites["missing"]
    arms += _recompute_arms(case, ordered)
    arms += _outplace_arms(case, ordered)
    arms += _keep_saved_arms(case, ordered)
    for c in ordered:
        if c.kind not in ("extra", "missing"):
            continue
        run = "b" if c.kind == "extra" else "a"
        if not c.call_site:
            blind.append(c.event)
            continue
        if c.call_site in shared:
            if c.call_site not in seen:
                seen.add(c.call_site)
                said.append(
                    f"{c.describe()}: both runs execute events from {c.call_site} that the other "
                    "does not, so the call itself is made by both; what it does differs, which "
                    "no suppression of one run's call tests"
                )
            continue
        spec = case.run_b if run == "b" else case.run_a
        site = call_site(c.call_site, spec.cwd)
        target = site.target if site else None
        if target is None or target.startswith("__main__"):
            said.append(
                f"{c.describe()}: the call is made outside a function of an importable module "
                "(the script itself, or module level), which no patch can reach"
            )
            continue
        if target in seen:
            continue
        seen.add(target)
        what = c.state_write or f"{c.event_kind} event"
        where = f"{site.file}:{site.line} ({site.qualname})"
        at_init = c.step == INIT_STEP
        said_call = (
            f"only run {run.upper()} calls {target} ({site.file}:{site.line}), which runs "
            f"{what} at {c.event} "
            + ("during initialisation, before the first step" if at_init else f"in step {c.step}")
        )
        if is_draw(c.event):
            # A draw only one run makes moves a generator the other run's next draws share:
            # running the function with every stream put back after it tests exactly that,
            # and leaves what it returns to its caller as it was.
            arms.append(
                _arm(
                    run,
                    f"isolate-rng {target}",
                    where,
                    f"{said_call}: its draws move a generator that training draws from",
                    f"the trace shows {c.describe()}, a random draw; running {target} under "
                    f"saved-and-restored generator state in run {run.upper()} alone tests it",
                )
            )
            # The other run may make the same draws where the trace does not see them (a
            # data loader's worker processes) or in another order: then what each call draws
            # depends on the process and the order it runs in. Seeding every call from what
            # names it, in both runs, tests that.
            arms.append(
                _arm(
                    "both",
                    f"seed-rng {target}",
                    where,
                    f"{target} ({site.file}:{site.line}) draws from a process-wide generator, "
                    "so what each call draws depends on the process and the order it runs in, "
                    "which the runs do not share",
                    f"the trace shows {c.describe()} in run {run.upper()}'s traced process "
                    f"alone; seeding each call of {target} from its arguments in both runs "
                    "tests it",
                    category="draw-source",
                )
            )
        # A function that draws may write what it is handed as well (a probe that freezes
        # the backbone it fits on, and draws its own init): its draw is only the first of
        # its extra events, the one this candidate names.
        if (c.writes_state or c.event_kind == "module" or is_draw(c.event)) and not at_init:
            # A write the call makes to what it is handed (a gradient, a module's buffers;
            # a module's forward may write its own). Not before the first step: there the
            # call's own suppression, scoped to initialisation, is the test.
            # putting those tensors back after it tests the write and keeps what it returns,
            # which its caller may need.
            arms.append(
                _arm(
                    run,
                    f"isolate-writes {target}",
                    where,
                    f"{said_call}: its writes to what it is handed (tensors, modules' modes "
                    "or trainability) change training",
                    f"the trace shows {c.describe()}, a write; running {target} with the tensors "
                    f"it is handed put back after it in run {run.upper()} alone tests it",
                )
            )
        arms.append(
            _arm(
                run,
                f"suppress {target}" + ("@init" if at_init else ""),
                where,
                f"{said_call}: this extra call changes state",
                f"the trace shows {c.describe()}; suppressing the function it came from in run "
                f"{run.upper()} alone tests it",
            )
        )
        base = _overridden(site.file, site.qualname or "")
        if base is not None:
            # Suppressing an override drops the work its base does too; running the base in
            # its place is the run without the override.
            arms.append(
                _arm(
                    run,
                    f"replace {target}={site.module}:{base}",
                    where,
                    f"{said_call}, an override of {base}: the override changes the bits",
                    f"the trace shows {c.describe()}; running {base} in place of the override in "
                    f"run {run.upper()} alone tests it",
                )
            )
        if len(seen) >= MAX_CALLS:
            break
    if blind:
        names = ", ".join(dict.fromkeys(blind))
        said.append(
            f"{len(blind)} event(s) only one run executes have no recorded call site, so no "
            f"function to suppress: {names[:300]}"
        )
    return arms, said


# activation checkpointing in a job's own code: torch's, DeepSpeed's, Megatron's
RECOMPUTES = re.compile(
    r"torch\.utils\.checkpoint|checkpoint_sequential|deepspeed\.checkpointing"
    r"|activation_checkpoint|tensor_parallel\.checkpoint"
)


@cache
def _recomputes(cwd: str) -> str | None:
    """The first of the job's files (below its working directory) that uses activation
    checkpointing, else None."""
    root = Path(cwd)
    for k, f in enumerate(sorted(root.rglob("*.py"))):
        if k > 400:
            break
        rel = f.relative_to(root).parts
        if any(p.startswith(".") or p in ("site-packages", "answer") for p in rel):
            continue
        try:
            if RECOMPUTES.search(f.read_text(errors="replace")[:500_000]):
                return str(f.relative_to(root))
        except OSError:
            continue
    return None


def _recompute_arms(case: Case, ordered: list[Candidate]) -> list[Arm]:
    """A run that executes events the other does not, whose job checkpoints activations:
    the extra events may be recomputations, which see another state than their forward (a
    buffer or attribute the forward wrote, the generators when they are not preserved).
    The recomputation run under the forward's state tests it (recompute-state)."""
    out: list[Arm] = []
    for kind, run in (("extra", "b"), ("missing", "a")):
        if not any(c.kind == kind for c in ordered):
            continue
        spec = case.run_b if run == "b" else case.run_a
        used = _recomputes(str(Path(spec.cwd or ".").resolve()))
        if used is None:
            continue
        out.append(
            _arm(
                run,
                "recompute-state",
                f"state:recompute (activation checkpointing, {used})",
                f"run {run.upper()} executes events the other does not, and its job "
                f"checkpoints activations ({used}): a recomputation in backward sees another "
                "state than the forward it rebuilds",
                "recomputing each checkpointed block under the state its forward ran under "
                f"in run {run.upper()} alone tests it",
                category="recompute",
            )
        )
    return out


def _plain(event: str) -> tuple[str, str]:
    """(scope, op base name) of an event, the overload and an in-place '_' dropped."""
    scope, _, name = event.partition("::")
    base = name.rsplit("::", 1)[-1].split(".", 1)[0]
    return scope, base.removesuffix("_")


def _outplace_arms(case: Case, ordered: list[Candidate]) -> list[Arm]:
    """An in-place op one run makes where the other makes the same op out of place (a fast
    path that writes over its input): that line's in-place calls run out of place in the
    run that makes them. If every step then matches, the write clobbered a value still read."""
    out: list[Arm] = []
    seen: set[str] = set()
    for c in ordered:
        if c.kind not in ("extra", "missing") or not c.call_site or c.event_kind != "op":
            continue
        name = c.event.rsplit("::", 1)[-1].split(".", 1)[0]
        if not name.endswith("_") or name.endswith("__"):
            continue
        other = "missing" if c.kind == "extra" else "extra"
        twin = any(
            o.kind == other and o.step == c.step and _plain(o.event) == _plain(c.event)
            for o in ordered
        )
        if not twin:
            continue
        run = "b" if c.kind == "extra" else "a"
        spec = case.run_b if run == "b" else case.run_a
        site, _ = _job_site(spec, c.call_site)
        if site in seen:
            continue
        seen.add(site)
        out.append(
            _arm(
                run,
                f"outplace {site}",
                site,
                f"run {run.upper()} computes {name} in place at {site} where run "
                f"{'A' if run == 'b' else 'B'} computes it out of place: the write clobbers a "
                "tensor the computation still reads",
                f"the trace shows {c.describe()} and the other run's out-of-place {name[:-1]}; "
                f"running that line's in-place calls out of place in run {run.upper()} tests it",
                category="inplace-write",
            )
        )
    return out[:2]


def _keep_saved_arms(case: Case, ordered: list[Candidate]) -> list[Arm]:
    """An in-place op of the job's own code that one run makes where the other makes the
    same op out of place: beside clobbering a value the forward reads again (outplace), the
    write may land on a tensor autograd saved for the backward, past the version counter
    (through ``.data``), so the forward looks alike and the gradients do not. Every saved
    tensor copied when saved, in the run that makes the write, tests it (keep-saved); its
    report names the lines that wrote into a saved tensor that changed."""
    for c in ordered:
        if c.kind not in ("extra", "missing") or not c.call_site or c.event_kind != "op":
            continue
        name = c.event.rsplit("::", 1)[-1].split(".", 1)[0]
        if not name.endswith("_") or name.endswith("__"):
            continue
        other = "missing" if c.kind == "extra" else "extra"
        if not any(
            o.kind == other and o.step == c.step and _plain(o.event) == _plain(c.event)
            for o in ordered
        ):
            continue
        run = "b" if c.kind == "extra" else "a"
        spec = case.run_b if run == "b" else case.run_a
        site, inside = _job_site(spec, c.call_site)
        if not inside or "site-packages" in site:
            continue
        return [
            _arm(
                run,
                "keep-saved",
                site,
                f"run {run.upper()} writes in place at {site} ({name}) over a tensor autograd "
                "saved for the backward, past its version counter: the backward computes "
                "with the overwritten values",
                f"the trace shows {c.describe()}; copying every tensor saved for the "
                f"backward when it is saved, in run {run.upper()} alone, tests it",
                category="inplace-write",
            )
        ]
    return []


def replica_arms(case: Case, trace_dirs: dict[str, str], workspace: str) -> list[Arm]:
    """Parameters whose copies part across the ranks of one traced run while the other run's
    ranks agree: their gradients were not averaged across ranks. Averaging them in that run
    (sync-grads) tests it; replicas that drift are a defect whatever setting led there."""
    from ..compare.replicas import replica_split

    dirs = {}
    for run in ("a", "b"):
        d = Path(trace_dirs.get(run, ""))
        if not d.is_absolute() and not d.exists():
            d = Path(workspace) / d
        dirs[run] = d
    if not all(d.is_dir() for d in dirs.values()):
        return []
    split = replica_split(dirs["a"], dirs["b"])
    if split is None:
        return []
    names = split.params[:8]
    other = "A" if split.run == "b" else "B"
    return [
        _arm(
            split.run,
            "sync-grads " + ",".join(names),
            f"param:{','.join(names)} (copies part across ranks {split.ranks})",
            f"run {split.run.upper()}'s ranks hold different copies of {', '.join(names)} after "
            f"step {split.step}'s update while run {other}'s ranks agree: their gradients are "
            "not averaged across the ranks",
            f"the optimizer events of both traced runs, rank by rank; averaging those gradients "
            f"as the backward accumulates them, in run {split.run.upper()} alone, tests it",
            category="replica-sync",
        )
    ]


def first_receivers(res: CompareResult) -> list[Divergence]:
    """Each rank's first receiver: the first paired event whose inputs already differ."""
    return [r.first_receiver for r in res.ranks if r.first_receiver is not None]


def unproduced_inputs(receivers: list[Divergence]) -> list[Producer]:
    """The differing inputs of the first receivers that no traced event of their run wrote:
    values that came from before the window (or from outside the capture)."""
    return [p for fr in receivers for p in fr.producers if p.event is None and p.digest]


def carried_write_arms(case: Case, receivers: list[Divergence]) -> tuple[list[Arm], list[str]]:
    """Each first receiver's differing input that its run wrote in an earlier step: a value
    carried across steps. Written there in place by the job's own line (a batch a cache hands
    out again after the step standardised it in place, a buffer a step mutates), that line's
    in-place calls run out of place in that run test whether the write is what reaches the
    later read. What the search found is said either way."""
    arms: list[Arm] = []
    said: list[str] = []
    seen: set[str] = set()
    for fr in receivers:
        for p in fr.producers:
            at = fr.a if p.run == "a" else fr.b
            ev = p.event
            if ev is None or at is None or ev.step >= at.step:
                continue
            # events before the first step's first forward (its batch, set-up) are the
            # trace's initialisation
            when = "before the first step" if ev.step == INIT_STEP else f"in step {ev.step}"
            said.append(
                f"run {p.run.upper()} rank {at.rank}: input {p.input} of {at.where()} is output "
                f"{p.output} of {ev.where()}, written {when}: a value carried across steps"
            )
            name = ev.name.split("::")[-1].split(".", 1)[0]
            if ev.kind != "op" or not name.endswith("_") or name.endswith("__") or not ev.caller:
                continue
            spec = case.run_b if p.run == "b" else case.run_a
            site, inside = _job_site(spec, ev.caller)
            if not inside or "site-packages" in site:
                continue  # a library's write: no line of the job to run out of place
            if site in seen:
                continue
            seen.add(site)
            arms.append(
                _arm(
                    p.run,
                    f"outplace {site}",
                    site,
                    f"run {p.run.upper()} writes a tensor in place at {site} ({name}, {when}) "
                    f"and reads it again in step {at.step} ({at.name}): the in-place write "
                    "reaches a later computation",
                    f"input {p.input} of {at.name} in step {at.step} in run {p.run.upper()} is "
                    f"the output of {name} at {site}, written {when}; running that line's "
                    f"in-place calls out of place in run {p.run.upper()} tests it",
                    category="inplace-write",
                )
            )
    return arms[:2], said[:4]


def _job_site(spec: RunSpec, caller: str) -> tuple[str, bool]:
    """``FILE:LINE`` of a call site, the file relative to the run's working directory where
    it lies under it (what outplace takes), and whether it does."""
    file, _, line = caller.rpartition(":")
    root = str(Path(spec.cwd or ".").resolve()).rstrip("/") + "/"
    inside = file.startswith(root)
    return f"{file[len(root) :] if inside else file}:{line}", inside


def _arm(
    run: str,
    intervention: str,
    where: str,
    statement: str,
    rationale: str,
    category: str = "extra-call",
) -> Arm:
    key = intervention.removeprefix("suppress ")  # a suppression keeps its older id
    hid = "H-" + hashlib.sha256(f"extra-call|{run}|{key}".encode()).hexdigest()[:10]
    return Arm(
        run=run,
        intervention=intervention,
        kind=category,
        location=where,
        hypothesis=Hypothesis(
            id=hid,
            statement=statement,
            category=category,
            rationale=rationale,
            classification=CLASSIFICATION.get(category, Classification.unknown),
        ),
    )

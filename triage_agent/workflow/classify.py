"""What each hypothesis category means for a verdict, which policy tests its fix, and which
trace events it can explain.

The mapping is a statement of the project's contract, not knowledge of any case:
- rng-state, scheduler-state, cursor-state, optimizer-init, collectives, extra-call: the run
  did something the uninterrupted or reference run did not (lost state, an extra update, a
  race): a bug.
- amp-order: gradients clipped while a GradScaler still holds them scaled: a bug (the
  documented order is unscale, then clip).
- casts, accumulation: a different but valid arithmetic order or precision: a
  numerical-policy difference, to be matched (or accepted) deliberately.
- nondeterminism: a kernel whose result depends on scheduling: a bug against the
  repeatability contract, fixed by deterministic algorithms.
- environment: a declared difference in environment variables between the runs.
- config: a declared difference in a launch flag or a config key. Giving B A's value proves
  that the setting carries the whole difference, which is the comparison's own premise; it
  cannot show whether the two values are meant to compute differently (a numerical policy:
  another wire dtype, another clip order) or meant to be equivalent and expose a defect
  (two parameter groups that should change nothing): unknown, the setting named, until a
  more specific cause is proven or someone decides which is meant. (An environment
  difference is classified as such: that class says where the difference is, not whether
  it is intended.)
- precision: a declared setting whose two values name two precisions (fp32 against bf16):
  the runs were asked, by the values themselves, to compute in different precisions; proven
  to carry the difference, that is a numerical-policy difference.
- config-policy, config-defect: a proven config setting read further from the op trace of
  the two runs (workflow/setting_effect.py): the same arithmetic reordered is a policy, a
  scalar an op is given that changes with the setting is a defect the setting exposes.
- source-change: reverting one changed file alone makes every step match; which file is
  proven, whether its new arithmetic is wrong is not: unknown until someone reads it.
- execution-setting: a kernel-choosing policy (deterministic algorithms) that made B match A
  changes none of A's bits: A already runs with that setting and B does not
  (workflow/execution_setting.py): an environment difference at the kernel it swaps.

"Explains" is a relation between a hypothesis and one trace event: the event is the kind
of site the category predicts (a random op for lost RNG state, a cast op for a cast, ...),
or it was called from the very source lines the hypothesis's findings point at. Op names
are parsed (``namespace::op.overload``) and compared whole, never searched as substrings:
``aten::addmm`` is no addition, ``aten::index_add_`` no accumulation order.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from ..compare.result import EventRef
from ..records import Classification, Finding

CLASSIFICATION: dict[str, Classification] = {
    "rng-state": Classification.bug,
    "scheduler-state": Classification.bug,
    "cursor-state": Classification.bug,
    "optimizer-init": Classification.bug,
    "collectives": Classification.bug,
    "nondeterminism": Classification.bug,
    "extra-call": Classification.bug,
    "recompute": Classification.bug,
    "optimizer-membership": Classification.bug,
    "weight-ties": Classification.bug,
    "draw-source": Classification.bug,
    "seed-value": Classification.bug,
    "inplace-write": Classification.bug,
    "replica-sync": Classification.bug,
    "amp-order": Classification.bug,
    "resume-state": Classification.bug,
    "casts": Classification.policy_difference,
    "accumulation": Classification.policy_difference,
    "config": Classification.unknown,
    "precision": Classification.policy_difference,
    "environment": Classification.environment,
    "config-policy": Classification.policy_difference,
    "config-defect": Classification.bug,
    "execution-setting": Classification.environment,
}

FIX_POLICY: dict[str, str] = {
    "rng-state": "restore-rng",
    "scheduler-state": "restore-scheduler",
    "cursor-state": "restore-cursors",
    "nondeterminism": "deterministic",
    "execution-setting": "deterministic",
}

FIX_TEXT: dict[str, str] = {
    "source-change": "read the change to that file: if the new arithmetic is intended, adopt it in "
    "the reference as the declared numerical policy; if not, revert it",
    "rng-state": "save every RNG stream (python, numpy, torch CPU, each CUDA device, model-parallel "
    "trackers) and the data cursor with the checkpoint, and restore them bitwise on load",
    "nondeterminism": "enable torch.use_deterministic_algorithms(True) with CUBLAS_WORKSPACE_CONFIG, or "
    "replace the atomic kernel by a fixed-order reduction",
    "casts": "keep the reduced value in fp32 until it is accumulated (drop the low-precision round "
    "trip), or adopt the reference's cast placement as the declared numerical policy",
    "accumulation": "accumulate in the reference's order and dtype (or declare the new order a policy)",
    "optimizer-init": "make optimizer initialisation side-effect free: no step, decay or counter advance before the first real step",
    "collectives": "wait on async handles before reading their buffers; record_stream buffers handed to other streams; guard empty contributions",
    "scheduler-state": "save the LR scheduler's state_dict with the checkpoint and load it on "
    "resume, after the optimizer's",
    "cursor-state": "make the data cursor's state_dict return every attribute its position "
    "depends on (load_state_dict then restores them)",
    "environment": "align the environment variable between the runs (or pin it in the job itself)",
    "config": "the setting alone carries the difference; decide whether its two values are meant to "
    "compute differently (then declare it a numerical policy) or to be equivalent (then read the first "
    "divergence: the code there breaks the equivalence)",
    "precision": "the runs were asked to compute in different precisions: declare one the numerical "
    "policy and give both runs that value",
    "extra-call": "remove the extra call from the run that makes it, or make it side-effect free",
    "recompute": "make the checkpointed block compute the same thing when it is recomputed: no "
    "state its forward writes may be read again by the recomputation (compute it once, outside "
    "the block, or skip the write while recomputing), and preserve the generators it draws from",
    "draw-source": "draw from a generator derived from what identifies the call (the job's "
    "seed, the sample's index and the epoch), not from a process-wide stream whose state "
    "depends on which process runs the call and in what order",
    "optimizer-membership": "build the optimizer after the model is final (every swap, wrap "
    "or conversion of a layer done), or hand it the new parameters: an optimizer holds the "
    "tensors it was given, not the names",
    "weight-ties": "assign the one Parameter to every module that shares it, as the other run "
    "does, instead of copying its values: a copy starts equal and trains apart",
    "resume-state": "save that part with the checkpoint and load it into the same object on "
    "resume (by the parameter's name for optimizer state), after everything that rebuilds it",
    "inplace-write": "compute that line out of place (or copy the tensor the in-place write "
    "would clobber): another name still reads it",
    "replica-sync": "keep every trainable parameter in the data-parallel synchronisation (or "
    "freeze what is left out): copies that each rank updates from its own gradient drift apart",
    "seed-value": "seed that line from the job's configured seed (and what the job controls: a "
    "rank, a worker id), not from a value each launch or each process makes anew",
    "config-policy": "the setting computes the same quantity in another order: declare one value "
    "the numerical policy and give both runs that value",
    "config-defect": "fix the code named: the value it gives the op should not depend on the "
    "setting; then the two values of the setting agree bit for bit",
    "execution-setting": "run B with the execution setting A runs with (or both without it): the "
    "kernel named is the one the setting swaps, and under one setting the runs agree bit for bit",
}

# Base op names (the in-place trailing '_' dropped) of each family, compared whole.
RANDOM_OPS = frozenset(
    {
        "bernoulli",
        "dropout",
        "native_dropout",
        "feature_dropout",
        "alpha_dropout",
        "feature_alpha_dropout",
        "fused_dropout",
        "rand",
        "rand_like",
        "randn",
        "randn_like",
        "randint",
        "randint_like",
        "randperm",
        "normal",
        "uniform",
        "multinomial",
        "exponential",
        "geometric",
        "cauchy",
        "log_normal",
        "random",
        "poisson",
        "rrelu_with_noise",
    }
)
ATOMIC_OPS = frozenset(
    {
        "index_add",
        "index_reduce",
        "scatter_add",
        "scatter_reduce",
        "index_put",
        "_index_put_impl",
        "put",
        "embedding_dense_backward",
        "_embedding_bag",
        "_embedding_bag_backward",
        "_embedding_bag_dense_backward",
        "histc",
        "bincount",
        "cumsum",
    }
)
CAST_OPS = frozenset(
    {
        "_to_copy",
        "to",
        "copy",
        "type_as",
        "_autocast_to_reduced_precision",
        "_autocast_to_full_precision",
        "_convert_element_type",
    }
)
ACCUMULATION_OPS = frozenset(
    {"add", "sub", "sum", "nansum", "mean", "div", "_foreach_add", "_foreach_div", "cumsum"}
)
DROPOUT_MODULES = frozenset(
    {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"}
)

_OP_RE = re.compile(r"^(?:(?P<ns>[A-Za-z_][\w]*)::)?(?P<op>[A-Za-z_][\w]*)(?:\.(?P<ov>[\w]+))?$")


class OpName(BaseModel):
    """``aten::add_.Tensor`` as namespace ``aten``, op ``add_``, overload ``Tensor``."""

    namespace: str | None
    op: str
    overload: str | None = None

    @property
    def base(self) -> str:
        """The functional op an in-place variant belongs to (``add_`` -> ``add``)."""
        return self.op[:-1] if self.op.endswith("_") and not self.op.endswith("__") else self.op


def parse_op(name: str) -> OpName | None:
    m = _OP_RE.match(name.strip())
    if m is None:
        return None
    return OpName(namespace=m["ns"], op=m["op"], overload=m["ov"])


class EventSite(BaseModel):
    """What ``explains`` reads of one trace event."""

    kind: str
    scope: str = ""
    name: str
    op: OpName | None = None
    caller_file: str | None = None
    caller_line: int | None = None
    rng_differs: bool | None = None

    @classmethod
    def of(cls, ref: EventRef, rng_differs: bool | None = None) -> EventSite:
        file, line = _split_caller(ref.caller)
        return cls(
            kind=ref.kind,
            scope=ref.scope,
            name=ref.name,
            op=parse_op(ref.name) if ref.kind == "op" else None,
            caller_file=file,
            caller_line=line,
            rng_differs=rng_differs,
        )


def _split_caller(caller: str | None) -> tuple[str | None, int | None]:
    if not caller or ":" not in caller:
        return caller, None
    file, _, line = caller.rpartition(":")
    return (file, int(line)) if line.isdigit() else (caller, None)


def _same_file(event_file: str, finding_file: str) -> bool:
    """A finding names its file relative to a scanned root; a caller names it absolute."""
    e, f = event_file.replace("\\", "/"), finding_file.replace("\\", "/").lstrip("./")
    return e == f or e.endswith("/" + f)


def at_site(event: EventSite, findings: list[Finding]) -> bool:
    """The event was called from the source lines one of the findings points at."""
    if event.caller_file is None or event.caller_line is None:
        return False
    return any(
        _same_file(event.caller_file, f.file) and f.line_start <= event.caller_line <= f.line_end
        for f in findings
    )


def _op_in(event: EventSite, family: frozenset[str]) -> bool:
    return event.op is not None and event.op.base in family


def predicts(category: str, event: EventSite) -> bool:
    """Whether the event is the kind of site a hypothesis of this category changes."""
    if category == "rng-state":
        return (
            _op_in(event, RANDOM_OPS)
            or (event.kind == "module" and event.name in DROPOUT_MODULES)
            or bool(event.rng_differs)
        )
    if category == "nondeterminism":
        return _op_in(event, ATOMIC_OPS)
    if category == "casts":
        # a cast inside an optimizer step or a collective's wire format is not traced op by op
        return _op_in(event, CAST_OPS) or event.kind in ("optimizer", "collective")
    if category == "accumulation":
        return _op_in(event, ACCUMULATION_OPS) or event.kind in ("optimizer", "collective")
    if category == "collectives":
        return event.kind == "collective"
    if category == "optimizer-init":
        return event.kind == "optimizer"
    return False


def explains(category: str, findings: list[Finding], event: EventSite) -> bool:
    """A hypothesis explains a first divergence when the event is at its site or of its kind."""
    return at_site(event, findings) or predicts(category, event)

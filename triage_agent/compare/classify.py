"""Reading an alignment: the first divergence of a rank, its role, and its known labels.

The rule (Megatron Core's tracing method): in execution order, the first paired event whose
input digests are equal and whose output digests differ is a candidate origin; an event
whose inputs already differ is a receiver, and the walk goes on. No origin on the traced
events means the origin lies outside the capture scope, and the result says what to widen.

Labels that change how a mismatch must be read:
- ``uncaptured-upstream``: the first mismatch is a view/slice/reshape/``_to_copy``; such an
  op cannot change bits itself, so an uncaptured kernel upstream wrote its input.
- ``probe-artifact``: ``empty*`` outputs, ``meta.uninitialized``, or an async destination
  hashed before completion (``meta.async`` true and ``meta.waited`` false). Set aside; the
  walk continues.
  A tensor marked uninitialised in one run only is compared by the bytes it held (the
  record's ``value``): equal bytes are equal tensors (:func:`settle_uninitialized`).
- ``possible-race``: inputs equal before the op in both runs but different after it
  (``meta.inputs_after``, digests taken after the op): something wrote them concurrently.
- ``collective``: equal local inputs, different outputs of a collective; a peer's
  contribution or the reduction order differs. The cross-rank summary says which.
- ``no-input-digests``: the format records no inputs; origin and receiver are undecidable.
- ``no-inputs-recorded``: a module-level event with nothing recorded on the way in (a
  backward event); observed there, never an origin, and the walk goes on.
- ``inner-diverged``: a module whose inputs are equal but inside which an op or submodule
  already differed; it receives that difference, and the walk goes on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .model import Ev
from .result import Divergence, EventRef, Label, Widen

_VIEW_OPS = frozenset(
    [
        "view",
        "_unsafe_view",
        "reshape",
        "slice",
        "select",
        "as_strided",
        "expand",
        "permute",
        "transpose",
        "t",
        "_to_copy",
        "to",
        "contiguous",
        "unsqueeze",
        "squeeze",
        "narrow",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "alias",
        "detach",
        "flatten",
        "unflatten",
        "view_as",
        "expand_as",
        "_reshape_alias",
        "lift_fresh",
    ]
)
_EMPTY_RE = re.compile(r"^(new_)?empty(_like|_strided|_permuted)?$")


def base_op(name: str) -> str:
    """'aten::slice.Tensor' -> 'slice'; 'aten.view.default' -> 'view'."""
    n = name.split("::")[-1]
    if n.startswith("aten."):
        n = n[5:]
    return n.split(".")[0]


def is_view_like(name: str) -> bool:
    return base_op(name) in _VIEW_OPS


def _overload(name: str) -> str:
    """'aten::add.out' -> 'out'; 'aten::mm' -> ''."""
    n = name.split("::")[-1]
    if n.startswith("aten."):
        n = n[5:]
    parts = n.split(".")
    return parts[1] if len(parts) > 1 else ""


def state_write(e: Ev) -> str:
    """What state ``e`` writes, or "" when it only computes new values.

    An optimizer step rewrites parameters and moments; a collective writes its buffers in
    place; an ATen op whose name ends in ``_`` (``add_``, ``copy_``, ``_foreach_mul_``) or
    whose overload is ``out`` writes a tensor it was given. Such an event, executed by one
    run only, changes what everything after it reads."""
    if e.kind == "optimizer":
        return f"optimizer step ({e.name})"
    if e.kind == "collective":
        return f"collective {e.name} (writes its buffers in place)"
    if e.kind == "op":
        op, overload = base_op(e.name), _overload(e.name)
        if op.endswith("_") and not op.endswith("__"):
            return f"in-place op {op}"
        if overload == "out" or overload.endswith("_out"):
            return f"op {op} writing an out= tensor"
    return ""


def artifact_reason(e: Ev) -> str | None:
    if _EMPTY_RE.match(base_op(e.name)):
        return f"'{e.name}' returns uninitialised memory; its digest is noise"
    meta = e.meta or {}
    if meta.get("uninitialized"):
        return "the tracer marked this output uninitialised"
    if meta.get("async") and meta.get("waited") is False:
        return "async destination hashed before its wait(); hash it after completion"
    return None


def ref(e: Ev, run: str, rank: int, source: Path) -> EventRef:
    return EventRef(
        run=run,  # type: ignore[arg-type]
        rank=rank,
        index=e.index,
        seq=e.seq,
        line=e.line,
        file=str(source),
        step=e.step,
        kind=e.kind,
        name=e.name,
        scope=e.scope,
        call=e.call,
        phase=e.phase,
        caller=e.caller,
        dump=e.dump,
    )


def _diff_idx(x: tuple, y: tuple) -> list[int]:
    out = [k for k, (p, q) in enumerate(zip(x, y, strict=False)) if p != q]
    out += list(range(min(len(x), len(y)), max(len(x), len(y))))
    return out


def demote_to_receiver(d: Divergence) -> Divergence:
    """A module that would be an origin, but something it ran had already diverged."""
    label = Label(
        code="inner-diverged",
        message="inputs equal, but an op or submodule inside this module differed first: "
        "its output carries that difference",
    )
    return d.model_copy(update={"role": "receiver", "labels": [*d.labels, label]})


def settle_uninitialized(ea: Ev, eb: Ev) -> tuple[Ev, Ev]:
    """The pair with each tensor one run marks uninitialised and the other does not read by
    the bytes it held, where the tracer kept their digest.

    The mark says the bytes are what the allocator left there; a write of those very bytes
    (zeros, or last step's identical result in a reused block) looks the same, and which
    one a launch sees is the allocator's choice. Where the bytes are equal the tensors are;
    where they differ the mark stands, as does the mismatch."""

    def settle(sa: tuple, sb: tuple, va: tuple | None, vb: tuple | None) -> tuple[tuple, tuple]:
        a, b = list(sa), list(sb)
        for k in range(min(len(a), len(b))):
            if a[k] == b[k]:
                continue
            if va is not None and k < len(va) and va[k] is not None and va[k] == b[k]:
                a[k] = b[k]
            elif vb is not None and k < len(vb) and vb[k] is not None and vb[k] == a[k]:
                b[k] = a[k]
        return tuple(a), tuple(b)

    va, vb = ea.values or (None, None), eb.values or (None, None)
    ins = settle(ea.inputs, eb.inputs, va[0], vb[0])
    outs = settle(ea.outputs, eb.outputs, va[1], vb[1])
    return (
        ea._replace(inputs=ins[0], outputs=outs[0]),
        eb._replace(inputs=ins[1], outputs=outs[1]),
    )


def _same_multiset(ea: Ev, eb: Ev) -> bool:
    return sorted(map(str, ea.inputs)) == sorted(map(str, eb.inputs))


def inputs_incomplete(ea: Ev, eb: Ev) -> str | None:
    """Why the recorded inputs of an event are not all it reads, or None.

    An optimizer update reads the gradient, and its hyper-parameters and scalar state: one
    recorded without its gradient, or whose hyper-parameters or step count differ between the
    runs, received its difference; it did not make it. (Hyper-parameters are known only for
    traces that record them.)
    """
    if ea.kind != "optimizer":
        return None
    for ev in (ea, eb):
        names = ev.meta.get("inputs")
        if names and "grad" not in names:
            return (
                "the update's recorded inputs are the parameter and its state, not the gradient "
                "it reads: not an origin; look at the gradient's producer"
            )
    ha, hb = ea.meta.get("hyper"), eb.meta.get("hyper")
    if isinstance(ha, dict) and isinstance(hb, dict) and ha != hb:
        keys = sorted(k for k in set(ha) | set(hb) if ha.get(k) != hb.get(k))
        said = ", ".join(f"{k} {ha.get(k)} vs {hb.get(k)}" for k in keys[:4])
        return f"the update reads hyper-parameters or scalar state that differ ({said})"
    return None


def judge_pair(
    ea: Ev, eb: Ev, rank: int, src_a: Path, src_b: Path, records_inputs: bool
) -> Divergence | None:
    """None when the pair agrees; otherwise its role and labels."""
    if ea.values is not None or eb.values is not None:
        ea, eb = settle_uninitialized(ea, eb)
    if ea.inputs == eb.inputs and ea.outputs == eb.outputs:
        if (
            ea.inputs_after is not None
            and eb.inputs_after is not None
            and ea.inputs_after != eb.inputs_after
        ):
            pass  # equal outputs but written-after inputs differ: reported as a race below
        else:
            return None
    d_in = _diff_idx(ea.inputs, eb.inputs)
    d_out = _diff_idx(ea.outputs, eb.outputs)
    labels: list[Label] = []
    ins_equal = not d_in
    if not records_inputs:
        role = "observed"
        labels.append(
            Label(
                code="no-input-digests",
                message="this format records no input digests: the first mismatch is where "
                "the difference was first observed, not a proven origin",
            )
        )
    elif not ea.inputs and not eb.inputs and ea.kind != "op":
        # nothing recorded on the way in (a module's backward event, a hook on a gradient):
        # "equal inputs" would be vacuous, so this is where the difference was seen, no more.
        # An op with no tensor inputs (randn, arange) keeps the rule: its output is its own.
        role = "observed"
        labels.append(
            Label(
                code="no-inputs-recorded",
                message="this event records no inputs: the first mismatch seen here is not "
                "a proven origin; the difference may come from anything upstream",
            )
        )
    elif ins_equal and (missing := inputs_incomplete(ea, eb)):
        # An event is an origin only when its recorded inputs are all it reads.
        role = "observed"
        labels.append(Label(code="inputs-incomplete", message=missing))
    elif ins_equal:
        role = "origin"
    else:
        role = "receiver"
    if d_in and len(ea.inputs) > 1 and ea.inputs != eb.inputs and _same_multiset(ea, eb):
        labels.append(
            Label(
                code="permuted-inputs",
                message="its tensor inputs are the other run's in another order: the frame "
                "that built the list (and what orders it: a set, a dict, a hash seed) is where "
                "to look, not the op",
            )
        )
    why = artifact_reason(ea) or artifact_reason(eb)
    if why:
        labels.append(Label(code="probe-artifact", message=why))
    if is_view_like(ea.name) and not why:
        labels.append(
            Label(
                code="uncaptured-upstream",
                message=f"'{ea.name}' cannot change bits; an uncaptured kernel upstream wrote "
                "this input (trace below the dispatcher, or one hop earlier)",
            )
        )
    if (
        ins_equal
        and ea.inputs_after is not None
        and eb.inputs_after is not None
        and ea.inputs_after != eb.inputs_after
    ):
        labels.append(
            Label(
                code="possible-race",
                message="inputs had equal digests before the op and different ones after it: "
                "written concurrently (a race or an unsynchronised stream)",
            )
        )
    if ins_equal and ea.kind == "collective" and d_out:
        labels.append(
            Label(
                code="collective",
                message="equal local inputs, different result: a peer rank's contribution "
                "or the reduction order differs; see the other ranks",
            )
        )
    if d_in and not d_out and records_inputs:
        labels.append(Label(code="absorbed", message="different inputs gave equal outputs here"))
    return Divergence(
        role=role,  # type: ignore[arg-type]
        a=ref(ea, "a", rank, src_a),
        b=ref(eb, "b", rank, src_b),
        inputs_equal=ins_equal if records_inputs else None,
        differing_inputs=d_in,
        differing_outputs=d_out,
        labels=labels,
    )


def widen_for(
    first: Divergence, header: dict[str, Any], first_step: int, world: int | None, traced_ranks: int
) -> Widen:
    """What to capture next when a rank's first mismatch is a receiver (no origin found)."""
    e = first.a or first.b
    assert e is not None  # a receiver is always a pair
    cfg = header.get("config", {}) if header else {}
    level = cfg.get("level")
    w = Widen()
    if e.step <= first_step:
        w.steps = (
            f"start the window before step {e.step}: the first traced step already "
            "receives different inputs"
        )
    else:
        w.steps = (
            f"steps before {e.step} matched; trace the boundary between steps "
            f"{e.step - 1} and {e.step} (optimizer step, data loader, RNG, checkpoint load)"
        )
    if world and traced_ranks < world:
        w.ranks = f"trace all {world} ranks (only {traced_ranks} traced)"
    elif e.kind == "collective":
        w.ranks = "compare the same collective's inputs on its peer ranks"
    if level and level not in ("ops", "aten"):
        w.level = f"capture level is '{level}': capture ATen ops in scope '{e.scope}'"
    else:
        w.level = "capture below the dispatcher (custom kernels) or semantic boundaries"
    inputs = ", ".join(str(k) for k in first.differing_inputs) or "?"
    w.scope = (
        f"widen the capture scope beyond '{e.scope or '<root>'}' to the producer of "
        f"input(s) {inputs} of '{e.name}'"
    )
    return w

"""Compare two captures boundary by boundary, step by step, through the mapping, and say
what the evidence at the first differing boundary points at.

A boundary matches at a step when every paired tensor has the same bytes (sha256 of the raw
bits, dtype and shape included) and neither side lacks one. The first differing boundary is
the earliest (step, boundary) in the order a step produces them; everything after it may be
downstream of it and is labelled so, not explained.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..manifest import tensor_entry
from .mapping import build_mapping, load_side, load_tensors
from .model import (
    BOUNDARIES,
    BoundaryResult,
    CompatTable,
    Mapping,
    Policy,
    SideMeta,
    TableRow,
    TensorDiff,
)

_ORDERED = {"float32": ("int32", 31), "bfloat16": ("int16", 15), "float16": ("int16", 15)}


def _ulp_and_count(a, b) -> tuple[int, int | None]:
    """(elements whose bits differ, largest ULP distance or None for non-floats)."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return max(a.numel(), b.numel()), None
    name = str(a.dtype).removeprefix("torch.")
    if name == "float64":
        ia, ib = a.contiguous().view(torch.int64), b.contiguous().view(torch.int64)
        return int((ia != ib).sum()), None
    if name not in _ORDERED:
        return int((a != b).sum()), None
    view, bits = _ORDERED[name]
    ia = a.contiguous().view(getattr(torch, view)).to(torch.int64)
    ib = b.contiguous().view(getattr(torch, view)).to(torch.int64)
    n = int((ia != ib).sum())
    sign = 1 << bits

    def ordered(i):  # two's-complement view of sign-magnitude, so adjacent floats are 1 apart
        i = torch.where(i < 0, i + 2 * sign, i)
        return torch.where(i >= sign, sign - i, i)

    return n, int((ordered(ia) - ordered(ib)).abs().max()) if a.numel() else 0


def _keys(boundary: str, mapping: Mapping, da: dict, db: dict) -> list[tuple[str, str]]:
    if boundary == "outputs":
        return [(o, o) for o in mapping.outputs]
    if boundary in ("grads", "master_weights"):
        return [(p.a, p.b) for p in mapping.pairs]
    prefixes = sorted({k.split(":", 1)[0] for k in (*da, *db)})
    return [(f"{k}:{p.a}", f"{k}:{p.b}") for k in prefixes for p in mapping.pairs]


def compare_step(step: int, boundary: str, mapping: Mapping, da: dict, db: dict) -> BoundaryResult:
    res = BoundaryResult(step=step, boundary=boundary, compared=0)  # type: ignore[arg-type]
    for ka, kb in _keys(boundary, mapping, da, db):
        ta, tb = da.get(ka), db.get(kb)
        if ta is None or tb is None:
            res.missing.append(f"{ka} ({'A' if ta is None else 'B'} lacks it)")
            continue
        res.compared += 1
        ea, eb = tensor_entry(ta), tensor_entry(tb)
        if ea == eb:
            continue
        n, ulp = _ulp_and_count(ta, tb)
        res.differing.append(
            TensorDiff(name=ka, elements=ta.numel(), differing=n, max_ulp=ulp, a=ea, b=eb)
        )
    return res


def compare_captures(
    a_dir: Path, b_dir: Path, mapping: Mapping
) -> tuple[list[BoundaryResult], int]:
    ma, mb = load_side(a_dir), load_side(b_dir)
    steps = min(ma.steps, mb.steps)
    out: list[BoundaryResult] = []
    for s in range(steps):
        da = load_tensors(Path(a_dir) / f"step{s:04d}.pt")
        db = load_tensors(Path(b_dir) / f"step{s:04d}.pt")
        for boundary in BOUNDARIES:
            out.append(
                compare_step(s, boundary, mapping, da.get(boundary, {}), db.get(boundary, {}))
            )
    return out, steps


def _param(name: str) -> str:
    return name.split(":", 1)[1] if ":" in name and not name.startswith("<") else name


def _shape_classes(names: list[str], mapping: Mapping) -> str:
    dims = {p.a: len(p.shape) for p in mapping.pairs}
    c = Counter(f"{dims.get(n, '?')}-D" for n in names)
    return ", ".join(f"{k}: {v}" for k, v in sorted(c.items()))


def _ratio_range(
    first: BoundaryResult, mapping: Mapping, a_dir: Path, b_dir: Path
) -> tuple[float, float] | None:
    """(min, max) of B/A over every nonzero element of the differing tensors, or None."""
    da = load_tensors(Path(a_dir) / f"step{first.step:04d}.pt").get(first.boundary, {})
    db = load_tensors(Path(b_dir) / f"step{first.step:04d}.pt").get(first.boundary, {})
    to_b = {p.a: p.b for p in mapping.pairs}
    lo, hi = float("inf"), float("-inf")
    for d in first.differing:
        ta, tb = da.get(d.name), db.get(to_b.get(d.name, ""))
        if ta is None or tb is None or ta.shape != tb.shape or not ta.is_floating_point():
            return None
        ta, tb = ta.double(), tb.double()
        nz = ta != 0
        if bool(nz.any()):
            r = tb[nz] / ta[nz]
            lo, hi = min(lo, float(r.min())), max(hi, float(r.max()))
    return (lo, hi) if lo <= hi else None


def diagnose(
    first: BoundaryResult,
    results: list[BoundaryResult],
    mapping: Mapping,
    ma: SideMeta,
    mb: SideMeta,
    dirs: tuple[Path, Path] | None = None,
) -> Policy:
    """Name what the evidence at ``first`` points at, from captured facts only: the settings
    each inner optimizer held for each tensor at that step, and whether the boundaries
    upstream of it in the same step match."""
    differing = sorted({_param(d.name) for d in first.differing})
    sa, sb = ma.settings.get(first.step, {}), mb.settings.get(first.step, {})
    by_key: dict[str, list[str]] = {}
    values: dict[str, set[tuple[str, str]]] = {}
    for p in mapping.pairs:
        xa, xb = sa.get(p.a, {}), sb.get(p.b, {})
        for k in sorted(set(xa) & set(xb)):
            if xa[k] != xb[k]:
                by_key.setdefault(k, []).append(p.a)
                values.setdefault(k, set()).add((xa[k], xb[k]))
    # the optimizer's settings act on what it writes (moments, counters, master weights):
    # the outputs and the gradients it consumes are computed before it reads them
    if by_key and first.boundary in ("moments", "counters", "master_weights"):
        key = max(by_key, key=lambda k: len(set(by_key[k]) & set(differing)))
        hit = sorted(set(by_key[key]))
        covers = set(differing) <= set(hit)
        vals = "; ".join(f"A {va} vs B {vb}" for va, vb in sorted(values[key]))
        return Policy(
            name=f"optimizer setting {key!r} per tensor",
            kind="setting",
            setting=key,
            detail=(
                f"the inner optimizers held {key} {vals} for {len(hit)} paired tensors "
                f"({_shape_classes(hit, mapping)}); {len(differing)} tensors differ at "
                f"{first.boundary} step {first.step} ({_shape_classes(differing, mapping)})"
                + ("" if covers else ", not all of them among those")
            ),
            tensors=hit,
            explains_all=covers,
        )
    upstream = [
        r.boundary
        for r in results
        if r.step == first.step and BOUNDARIES.index(r.boundary) < BOUNDARIES.index(first.boundary)
    ]
    said = f"{len(differing)} of {first.compared} tensors differ ({_shape_classes(differing, mapping)})"
    ratio = _ratio_range(first, mapping, *dirs) if dirs and first.boundary == "grads" else None
    if ratio is not None and abs(ratio[0] - 1) < 1e-5 and abs(ratio[1] - 1) < 1e-5:
        return Policy(
            name="gradient scale (clip coefficient or loss scale)",
            kind="gradient-scale",
            detail=(
                f"{said}; outputs upstream match; B/A over every nonzero element lies in "
                f"[{ratio[0]:.9g}, {ratio[1]:.9g}]: one scalar multiplies every gradient on "
                "both sides and its value or rounding differs (how the norm is reduced, "
                "how the coefficient is formed); trace the norm and the scaling"
            ),
            explains_all=False,
        )
    if first.boundary == "outputs":
        name = "forward arithmetic" if first.step == 0 else "forward from updated weights"
        return Policy(
            name=name, kind="forward", detail=f"{said}; weights equal at init", explains_all=False
        )
    return Policy(
        name=f"{first.boundary} arithmetic with equal inputs",
        detail=(
            f"{said}; {', '.join(upstream) or 'nothing'} upstream in step {first.step} match, "
            "and the optimizer settings are equal: the frameworks compute this boundary "
            "differently (reduction dtype/order, update formula); trace the ops in between"
        ),
        explains_all=False,
    )


def build_table(
    a_dir: Path, b_dir: Path, mapping: Mapping | None = None, intervention: str | None = None
) -> tuple[CompatTable, Mapping]:
    mapping = mapping or build_mapping(a_dir, b_dir)
    ma, mb = load_side(a_dir), load_side(b_dir)
    results, steps = compare_captures(a_dir, b_dir, mapping)
    first = next((r for r in results if not r.matches), None)
    policy = diagnose(first, results, mapping, ma, mb, (a_dir, b_dir)) if first else None
    rows: list[TableRow] = []
    for boundary in BOUNDARIES:
        mine = [r for r in results if r.boundary == boundary]
        bad = [r for r in mine if not r.matches]
        if not mine or all(r.compared == 0 and not r.missing for r in mine):
            rows.append(TableRow(boundary=boundary, verdict="not captured"))
            continue
        if not bad:
            rows.append(TableRow(boundary=boundary, verdict="match", steps_compared=len(mine)))
            continue
        r0 = bad[0]
        is_first = first is not None and r0.step == first.step and r0.boundary == first.boundary
        detail = f"{len(r0.differing)} of {r0.compared} tensors at step {r0.step}"
        if r0.missing:
            detail += f", {len(r0.missing)} missing"
        rows.append(
            TableRow(
                boundary=boundary,
                verdict="differs",
                first_step=r0.step,
                steps_compared=len(mine),
                policy=policy.name if is_first and policy else "downstream of the first difference",
                detail=detail,
            )
        )
    table = CompatTable(
        a=f"{ma.framework} ({ma.wrapper} over {ma.optimizer})",
        b=f"{mb.framework} ({mb.wrapper} over {mb.optimizer})",
        steps=steps,
        rows=rows,
        first=first,
        policy=policy,
        unmapped=len(mapping.unmapped),
        pairs=len(mapping.pairs),
        intervention=intervention,
    )
    return table, mapping

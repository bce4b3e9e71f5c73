"""Per-step distance between two runs' metric fingerprints, as a PNG (matplotlib, Agg).

One panel per metric; for each shared rank, the distance per common step: ULPs when both
values are floats of the same dtype, otherwise the relative difference. Log scale (symlog
so an exact match, distance 0, is drawn on the axis). The first differing step and any
resume points are marked.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from .errors import InputError
from .metrics import MetricRun, MetricValue, diff_metrics, ulp_distance


def distance(a: MetricValue, b: MetricValue) -> tuple[float, str]:
    """(distance, unit): ULPs for same-dtype floats, else relative difference."""
    d = ulp_distance(a, b)
    if math.isfinite(d):
        return d, "ulp"
    x, y = a.as_float(), b.as_float()
    if x == y:
        return 0.0, "rel"
    denom = max(abs(x), abs(y))
    return (abs(x - y) / denom if denom else math.inf), "rel"


def check_png_path(out_png: str | os.PathLike[str]) -> Path:
    """The path a plot will be written to, exactly: a ``.png`` file in an existing directory.

    matplotlib appends ``.png`` to a name without a suffix (``/tmp`` became ``/tmp.png``), so
    the suffix is required; a missing parent directory is an error rather than created, so a
    typo does not leave a directory tree behind.
    """
    out = Path(out_png)
    if out.suffix.lower() != ".png":
        raise InputError(f"plot path {out} must end in .png")
    if out.is_dir():
        raise InputError(f"plot path {out} is a directory: give a file name ending in .png")
    parent = out.parent
    if not parent.is_dir():
        raise InputError(
            f"plot directory {parent} does not exist: create it or choose another --plot path"
        )
    return out


def plot_metric_distance(
    a: MetricRun, b: MetricRun, out_png: str | os.PathLike[str], rank: int | None = None
) -> Path:
    """Write the distance plot to ``out_png`` (see ``check_png_path``) and return that path."""
    out = check_png_path(out_png)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = diff_metrics(a, b)
    ranks = [rank] if rank is not None else d.ranks
    if rank is not None and rank not in d.ranks:
        raise InputError(f"rank {rank} is not in both runs (shared ranks: {d.ranks})")
    names = sorted({n for r in ranks for s in d.common_steps for n in a.ranks[r].steps.get(s, {})})
    if not names:
        raise InputError("the two runs share no metric at any common step: nothing to plot")
    fig, axes = plt.subplots(len(names), 1, figsize=(9, 2.6 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        units = set()
        for r in ranks:
            xs, ys = [], []
            for s in d.common_steps:
                va = a.ranks[r].steps.get(s, {}).get(name)
                vb = b.ranks[r].steps.get(s, {}).get(name)
                if va is None or vb is None:
                    continue
                dist, unit = distance(va, vb)
                units.add(unit)
                xs.append(s)
                ys.append(dist if math.isfinite(dist) else float("nan"))
            ax.plot(xs, ys, marker=".", linewidth=1, label=f"rank {r}")
        ax.set_yscale("symlog", linthresh=1.0 if units == {"ulp"} else 1e-12)
        ax.set_ylabel(f"{name}\n({'/'.join(sorted(units))})")
        if d.first_step is not None:
            ax.axvline(d.first_step, color="red", linestyle="--", linewidth=1)
        for s in sorted(set(d.resumes_a) | set(d.resumes_b)):
            ax.axvline(s, color="gray", linestyle=":", linewidth=1)
        if len(ranks) > 1:
            ax.legend(fontsize="small")
    axes[-1, 0].set_xlabel("step")
    first = "none" if d.first_step is None else str(d.first_step)
    fig.suptitle(f"A={a.source} vs B={b.source}: first differing step {first}", fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=110, format="png")
    except OSError as exc:
        raise InputError(f"cannot write plot {out}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return out

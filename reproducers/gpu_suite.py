"""Run every GPU reproducer on this machine and write the results as Markdown.

Usage (one command, on a CUDA machine with the package installed)::

    python -m reproducers.gpu_suite --out reproducers/gpu_suite_results.md

Each reproducer is generated into a scratch workspace (``--workspace``, default
``.triage-gpu-suite``), recorded in that workspace's ledger, launched through the same
launcher as everything else, and reported with its result, summary, duration and details.
The header carries the provenance (GPU, driver-visible CUDA, NCCL, torch, DeepSpeed, date).
Two-GPU reproducers (NCCL all_reduce, the async-collective variant) run when two or more
GPUs are visible; otherwise their rows say why they did not run. Nothing here asserts an
outcome: the Markdown is the measurement, to be pasted into benchmarks/GPU_RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from triage_agent.evidence_data import ReproducerData, dump_data
from triage_agent.ledger import Ledger
from triage_agent.provenance import capture

from .generator import generate
from .launcher import EnvPolicy, launch


def suite(gpus: int) -> list[dict[str, Any]]:
    """The reproducers to run, given how many GPUs are visible."""
    rows: list[dict[str, Any]] = []
    for op in (
        "index_add_",
        "scatter_add_",
        "index_put_",
        "embedding_backward",
        "bmm",
        "matmul",
        "cumsum",
    ):
        for det in (False, True):
            rows.append(
                {
                    "template": "op_repeatability",
                    "params": {"op": op, "device": "cuda", "repeats": 20, "deterministic": det},
                }
            )
    rows.append({"template": "async_lifetime", "params": {}})
    for stage in (0, 1, 2):
        rows.append(
            {"template": "optimizer_init", "params": {"zero_stage": stage, "dtype": "bf16"}}
        )
    rows.append({"template": "optimizer_init", "params": {"zero_stage": 1, "dtype": "fp32"}})
    rows.append({"template": "rng_resume", "params": {"zero_stage": 1}})
    if gpus >= 2:
        for ws in sorted({2, min(gpus, 4), min(gpus, 8)}):
            for dtype in ("float32", "bfloat16"):
                rows.append(
                    {
                        "template": "reduction_order",
                        "params": {"backend": "nccl", "world_size": ws, "dtype": dtype},
                    }
                )
    else:
        rows.append(
            {"template": "reduction_order", "params": {"backend": "nccl"}, "skip": "needs two GPUs"}
        )
    rows.append({"template": "reduction_order", "params": {"backend": "gloo", "world_size": 4}})
    return rows


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def run_suite(workspace: Path, timeout_s: float, only: list[str] | None = None) -> str:
    import torch

    gpus = torch.cuda.device_count()
    prov = capture()
    ledger = Ledger(workspace)
    lines = [
        f"### GPU reproducers — {time.strftime('%Y-%m-%d %H:%M %Z')}",
        "",
        f"- GPU: {prov.gpu} x{gpus}; torch {prov.torch}; CUDA {prov.cuda}; NCCL {prov.nccl}; "
        f"DeepSpeed {prov.deepspeed}; host {prov.hostname}",
        f"- command: `{' '.join([Path(sys.executable).name, '-m', 'reproducers.gpu_suite', *sys.argv[1:]])}`",
        "",
        "| template | params | result | summary | s |",
        "|---|---|---|---|---|",
    ]
    details: list[str] = []
    for row in suite(gpus):
        if only and row["template"] not in only:
            continue
        params = json.dumps(row["params"], sort_keys=True)
        if "skip" in row:
            lines.append(f"| {row['template']} | `{params}` | not run | {row['skip']} | |")
            continue
        gen = generate(
            {"template": row["template"], "params": row["params"]}, workspace, ledger=ledger
        )
        print(f"running {gen.id} {row['template']} {params}", file=sys.stderr, flush=True)
        ev = launch(gen.id, workspace, timeout_s=timeout_s, env_policy=EnvPolicy(threads=None))
        lines.append(
            f"| {row['template']} | `{params}` | **{ev.result.value}** | {_md_escape(ev.summary)[:300]} | "
            f"{ev.duration_s:.1f} |"
        )
        out = ev.data_as(ReproducerData).output
        body = (
            {k: out.get(k) for k in ("supported", "compared", "details", "notes")}
            if out
            else dump_data(ev.data)
        )
        details.append(
            f"<details><summary>{gen.id} {row['template']} {params}</summary>\n\n```json\n"
            f"{json.dumps(body, indent=1, default=str)[:6000]}\n```\n</details>\n"
        )
    return "\n".join(lines + ["", *details])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("reproducers/gpu_suite_results.md"))
    ap.add_argument("--workspace", type=Path, default=Path(".triage-gpu-suite"))
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per reproducer")
    ap.add_argument("--only", action="append", help="run only this template (repeatable)")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA device visible; run this on a GPU machine", file=sys.stderr)
        return 2
    text = run_suite(args.workspace, args.timeout, args.only)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

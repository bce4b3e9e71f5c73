"""The embedded demo case: write it out as a ``triage.toml`` and its training script.

``write_demo_case(dest)`` writes ``train.py`` (a tiny GPT trained with DeepSpeed ZeRO-1 on
two CPU ranks) and a ``triage.toml`` whose run A trains steps 0..40 in one process and
whose run B trains 0..36, checkpoints, and continues in a fresh process. Launch arguments
use the case tokens of :class:`triage_agent.records.RunSpec`: ``{out}`` is a fresh output
directory per launch, ``{bin}`` the bin directory of the interpreter running triage, so
the DeepSpeed launcher of the same environment is used even when that directory is not
on ``PATH``, ``{port}`` a free rendezvous port per launch.

Launching and caching the runs is not done here: :func:`triage_agent.runs.materialize_case`
(or ``triage run``) produces both runs' metric fingerprints like those of any other case.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from triage_agent.errors import InputError
from triage_agent.runs import OUT_TOKEN

DEMO_DIR = Path(__file__).resolve().parent
TRAIN_SCRIPT = "train.py"


def _train(*args: str) -> list[str]:
    return [
        "{bin}/deepspeed",
        "--num_gpus",
        "2",
        "--master_port",
        "{port}",
        TRAIN_SCRIPT,
        "--out",
        OUT_TOKEN,
        *args,
    ]


def demo_toml() -> str:
    """The demo's ``triage.toml``: facts about the two runs, nothing about the answer."""
    run_a = [_train("--steps-from", "0", "--steps-to", "40")]
    run_b = [
        _train("--steps-from", "0", "--steps-to", "36", "--save-at", "36", "--ckpt", "{out}/ckpt"),
        _train("--steps-from", "37", "--steps-to", "40", "--resume-from", "{out}/ckpt"),
    ]

    def argvs(cmds: list[list[str]]) -> str:
        return "[\n" + "".join(f"  {json.dumps(c)},\n" for c in cmds) + "]"

    return (
        "# A tiny GPT-style model, DeepSpeed ZeRO stage 1, AdamW, two CPU ranks on gloo.\n"
        "# Run A trains steps 0..40 in one process. Run B trains steps 0..36, saves a\n"
        "# DeepSpeed checkpoint, and a new process loads it and trains steps 37..40.\n"
        "[case]\n"
        'name = "demo-resume"\n'
        'description = "uninterrupted run (A) vs checkpoint at step 36 and resume (B)"\n'
        'workspace = ".triage"\n'
        'source_roots = ["."]\n'
        f'scan_paths = ["{TRAIN_SCRIPT}"]\n'
        "timeout_s = 300.0\n"
        "\n[runs.a]\n"
        'metrics = "{out}"\n'
        f"launch = {argvs(run_a)}\n"
        "\n[runs.b]\n"
        'metrics = "{out}"\n'
        f"launch = {argvs(run_b)}\n"
    )


def write_demo_case(dest: Path, *, overwrite: bool = False) -> Path:
    """Write ``train.py`` and ``triage.toml`` into ``dest``; return the ``triage.toml`` path.

    Idempotent: files already holding the same bytes are left alone. A file with other
    content (an edited case) is kept and an InputError raised unless ``overwrite``.
    """
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise InputError(
            f"{dest} exists and is not a directory: give a directory for the demo case"
        )
    files = {
        TRAIN_SCRIPT: (DEMO_DIR / TRAIN_SCRIPT).read_bytes(),
        "triage.toml": demo_toml().encode(),
    }
    clash = [
        n for n, data in files.items() if (dest / n).exists() and (dest / n).read_bytes() != data
    ]
    if clash and not overwrite:
        raise InputError(
            f"{dest} already holds a different {', '.join(clash)}: "
            "remove it, or write the demo case into another directory"
        )
    dest.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        target = dest / name
        if not target.exists() or target.read_bytes() != data:
            tmp = target.with_name(f".{name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
    return dest / "triage.toml"

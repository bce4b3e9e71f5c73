"""The GPU demo case: the same CUDA job twice (run-to-run), written out by `triage demo --gpu`."""

from __future__ import annotations

import shutil
from pathlib import Path

TOML = """# A small CUDA job (linear, GELU, bucket pooling, head; AdamW), run twice with the same seed.
[case]
name = "gpu-repeat"
description = "the same CUDA training command run twice"
workspace = ".triage"
source_roots = ["."]
scan_paths = ["train.py"]
timeout_s = 300.0

[runs.a]
metrics = "{out}"
launch = [["{python}", "train.py", "--out", "{out}"]]

[runs.b]
metrics = "{out}"
launch = [["{python}", "train.py", "--out", "{out}"]]
"""


def write_gpu_case(dest: Path) -> Path:
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).with_name("train.py"), dest / "train.py")
    (dest / "triage.toml").write_text(TOML)
    return dest / "triage.toml"

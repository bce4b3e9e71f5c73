"""The state capture at start-up: a process that never imports torch does not import it, and
a stream's start is taken when its module is first imported, before the job can seed it.

Real processes with the capture injected as a relaunch injects it
(:func:`triage_agent.boundary_capture.launch_env`); no torch job needs DeepSpeed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from triage_agent.boundary_capture import UNTOUCHED, BoundaryConfig, launch_env

JOB = """
import random
{seed}
import numpy as np
{npseed}
import torch

net = torch.nn.Linear(3, 1)
net(torch.ones(2, 3)).sum().backward()
"""


def _env(tmp_path, cfg: BoundaryConfig) -> dict[str, str]:
    path = tmp_path / "config.json"
    path.write_text(cfg.model_dump_json())
    return {**os.environ, **launch_env(path, os.environ.get("PYTHONPATH"))}


def test_a_process_that_never_imports_torch_does_not_import_it(tmp_path):
    env = _env(tmp_path, BoundaryConfig(out_dir=str(tmp_path / "rec")))
    probe = "import sys; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def _init_rng(tmp_path, seed: str, npseed: str) -> dict[str, str]:
    rec = tmp_path / "rec"
    env = _env(tmp_path, BoundaryConfig(out_dir=str(rec), stop=False))
    (tmp_path / "job.py").write_text(JOB.format(seed=seed, npseed=npseed))
    out = subprocess.run(
        [sys.executable, "job.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    (path,) = rec.glob("state-init-*.json")
    return json.loads(path.read_text())["manifest"]["rng"]


def test_streams_seeded_before_torch_is_imported_are_not_read_as_untouched(tmp_path):
    seeded = _init_rng(tmp_path, "random.seed(5)", "np.random.seed(3)")
    assert seeded["python"] != UNTOUCHED and seeded["numpy"] != UNTOUCHED
    # taken once torch was imported, before the Linear's initialisation drew from it
    assert seeded["torch_cpu"] != UNTOUCHED


def test_streams_nobody_seeded_are_read_as_untouched(tmp_path):
    rng = _init_rng(tmp_path, "", "")
    assert rng["python"] == UNTOUCHED and rng["numpy"] == UNTOUCHED

"""What an untraced launch injects into its processes: nothing, unless a policy or patch asks.

Every Python process of a launch (the launcher, each rank, helpers such as the
``py-cpuinfo`` subprocess DeepSpeed's op check starts) imports the injected bootstrap when
its directory is on ``PYTHONPATH``, and the bootstrap imports torch. The probe below reports,
from inside the launched process, whether our ``sitecustomize`` ran and whether torch is
loaded, and a ``sitecustomize`` of the job's own environment must still run either way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from triage_agent.fingerprint import CaptureConfig, capture_command
from triage_agent.fingerprint.command import injects
from triage_agent.fingerprint.inject import INJECT_DIR
from triage_agent.policies import PATCHES_ENV

PROBE = (
    "import json, os, sys; print(json.dumps({"
    "'torch': 'torch' in sys.modules, "
    "'injected': any(os.path.abspath(p) == os.environ['INJECT'] for p in sys.path), "
    "'own_site': os.environ.get('OWN_SITE_RAN')}))"
)


def _probe(tmp_path: Path, **config) -> dict:
    own = tmp_path / "own_site"
    own.mkdir(exist_ok=True)
    # the job's own sitecustomize: it sets a variable the probe reads back
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITE_RAN'] = 'yes'\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(own),
        "INJECT": str(INJECT_DIR),
    }
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
    res = capture_command(
        [sys.executable, "-c", PROBE], CaptureConfig(out_dir=out, **config), env=env
    )
    assert res.exit_code == 0, Path(res.stderr_log).read_text()
    return json.loads(Path(res.stdout_log).read_text().strip().splitlines()[-1])


def test_untraced_launch_without_policy_injects_nothing(tmp_path: Path) -> None:
    seen = _probe(tmp_path, level="none")
    assert seen == {"torch": False, "injected": False, "own_site": "yes"}


def test_a_policy_only_launch_injects_without_torch(tmp_path: Path) -> None:
    # restore-rng patches DeepSpeed and MetricLog on import: a helper process that imports
    # neither (py-cpuinfo) must not pay for torch either
    seen = _probe(tmp_path, level="none", policies=["restore-rng"])
    assert seen == {"torch": False, "injected": True, "own_site": "yes"}


def test_a_trace_a_policy_or_a_patch_file_still_injects(tmp_path: Path) -> None:
    # the launched cases are covered by every traced and policy relaunch test
    none = CaptureConfig(out_dir=tmp_path, level="none")
    assert not injects(none, {})
    assert injects(none.model_copy(update={"level": "module"}), {})
    assert injects(none.model_copy(update={"policies": ["restore-rng"]}), {})
    assert injects(none, {PATCHES_ENV: str(tmp_path / "patches.json")})

"""Where C++ extensions are built: this environment's own directory unless the user chose one,
for the tool's own builds and for every process it launches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from triage_agent.process import run_process

REPO = Path(__file__).resolve().parents[1]
VAR = "TORCH_EXTENSIONS_DIR"

# A product process as the CLI and the MCP server are one: it imports the runner, builds a
# launch environment from its own (the reproducer launcher's policy, run_process's callers'
# way), launches a small job and reports what that job saw, next to its own build roots.
PRODUCT = """
import json, os, sys
from reproducers.launcher import EnvPolicy
from triage_agent.fingerprint.native import loader
from triage_agent.extensions_dir import extensions_root
from triage_agent.process import run_process

out = sys.argv[1]
res = run_process(
    [sys.executable, "-c", "import os; print(os.environ.get('TORCH_EXTENSIONS_DIR', '-'))"],
    cwd=out, env=EnvPolicy().build(), timeout_s=60,
    stdout_path=out + "/job.out", stderr_path=out + "/job.err",
)
assert res.returncode == 0, open(out + "/job.err").read()
print(json.dumps({
    "job": open(out + "/job.out").read().strip(),
    "root": str(extensions_root()),
    "native": str(loader.build_directory("triage_native_cpu").parent),
}))
"""


def _product(tmp_path: Path, **env: str) -> dict[str, str]:
    """Run PRODUCT through the project's runner with this environment, less ``VAR``, plus
    ``env``; its one line read back."""
    base = {k: v for k, v in os.environ.items() if k != VAR}
    base["PYTHONPATH"] = str(REPO)
    res = run_process(
        [sys.executable, "-c", PRODUCT, str(tmp_path)],
        cwd=tmp_path,
        env={**base, **env},
        timeout_s=120,
        stdout_path=tmp_path / "product.out",
        stderr_path=tmp_path / "product.err",
    )
    assert res.returncode == 0, (tmp_path / "product.err").read_text()
    return json.loads((tmp_path / "product.out").read_text().splitlines()[-1])


def test_unset_the_environments_own_directory_is_used_and_launched_jobs_see_it(tmp_path):
    cache = tmp_path / "cache"
    seen = _product(tmp_path, XDG_CACHE_HOME=str(cache))
    own = cache / "bitwise-triage" / "torch_extensions"
    root = Path(seen["root"])
    assert root.parent == own and root.name.startswith(f"py{sys.version_info[0]}")
    # the job launched saw the same directory, and the native tracer builds there too
    assert seen["job"] == seen["root"] == seen["native"]


def test_a_directory_the_user_set_is_kept_for_builds_and_launched_jobs(tmp_path):
    mine = str(tmp_path / "my-extensions")
    seen = _product(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache"), **{VAR: mine})
    assert seen == {"job": mine, "root": mine, "native": mine}


def test_an_empty_value_counts_as_unset(tmp_path):
    """torch would take an empty TORCH_EXTENSIONS_DIR as the working directory."""
    seen = _product(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache"), **{VAR: ""})
    assert Path(seen["job"]).parent == tmp_path / "cache" / "bitwise-triage" / "torch_extensions"


TAG = (
    "import json; from triage_agent import extensions_dir as d; "
    "print(json.dumps([d.environment_tag(), d.environment_identity(), d.ninja_on_path()]))"
)


def _venv(path: Path) -> Path:
    """A second, real environment: a venv of its own that finds this one's packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


def _tag(python: Path | str, path: str) -> tuple[str, dict[str, str], str]:
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {k: v for k, v in os.environ.items() if k not in (VAR, "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH=path, PYTHONPATH=os.pathsep.join([str(REPO), *site]))
    out = subprocess.run(
        [str(python), "-c", TAG], env=env, capture_output=True, text=True, check=True
    )
    tag, ident, ninja = json.loads(out.stdout)
    return tag, ident, ninja


def test_two_environments_get_two_directories_even_with_the_same_packages(tmp_path):
    other = _venv(tmp_path / "other-env")
    path = os.environ["PATH"]
    here, here_ident, _ = _tag(sys.executable, path)
    there, there_ident, _ = _tag(other, path)
    # the same torch and DeepSpeed files, found through PYTHONPATH: only the prefix differs
    assert here_ident["torch"] == there_ident["torch"]
    assert here_ident["deepspeed"] == there_ident["deepspeed"]
    assert here_ident["prefix"] != there_ident["prefix"]
    assert here != there
    # and a tag is stable: the same environment asked again names the same directory
    assert _tag(sys.executable, path)[0] == here


def _ninja(d: Path, version: str) -> str:
    d.mkdir()
    exe = d / "ninja"
    exe.write_text(f"#!/bin/sh\necho {version}\n")
    exe.chmod(0o755)
    return str(d)


def test_a_different_ninja_gets_a_directory_of_its_own(tmp_path):
    """ninja 1.11 and 1.13 keep incompatible build logs: sharing a directory, each would
    rebuild everything the other built."""
    other = _venv(tmp_path / "env")  # its bin has no ninja: the one on PATH builds
    rest = os.environ["PATH"]
    old, old_ident, old_says = _tag(other, _ninja(tmp_path / "n111", "1.11.1") + ":" + rest)
    new, new_ident, new_says = _tag(other, _ninja(tmp_path / "n113", "1.13.0") + ":" + rest)
    assert (old_ident["ninja"], new_ident["ninja"]) == ("1.11.1", "1.13.0")
    assert old != new
    assert old_says == f"{tmp_path}/n111/ninja 1.11.1"  # what `triage ops build` prints


def _ops_locks(tmp_path: Path, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != VAR}
    out = subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "ops", "locks"],
        env={**base, "XDG_CACHE_HOME": str(tmp_path / "cache"), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()[0]


def test_ops_locks_says_which_directory_and_why(tmp_path):
    own = tmp_path / "cache" / "bitwise-triage" / "torch_extensions"
    line = _ops_locks(tmp_path)
    assert line.startswith(f"build root: {own}/py") and "this environment's default" in line
    mine = tmp_path / "mine"
    line = _ops_locks(tmp_path, **{VAR: str(mine)})
    assert line == f"build root: {mine} (the user's {VAR})"

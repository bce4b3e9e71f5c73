import os
import sys
from pathlib import Path

import pytest

from triage_agent.jit_ops import use_environment_default

# Before any test starts a process: tests launch `deepspeed` and `python` themselves too, and
# they must find the ops `make test`'s `triage ops build` built for this environment, not
# rebuild them for minutes inside a timeout. It moves where builds are cached, nothing else.
use_environment_default()


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    """The demo case written out and both runs produced, with the venv's bin off PATH.

    Launched once per session (run A: one DeepSpeed launch, run B: two) and shared by the
    tests that read those runs and by the workflow test on the demo, which runs in this
    workspace laid out as ``triage run`` lays out the embedded case, baselines in place.
    """
    from reproducers.demo.case import write_demo_case
    from triage_agent.cli.run_cmd import DEMO_DIR
    from triage_agent.config import load_case
    from triage_agent.runs import materialize_case

    ws = tmp_path_factory.mktemp("demo") / "ws"
    case = load_case(write_demo_case(ws / DEMO_DIR))
    case.workspace = str(ws.resolve())
    messages: list[str] = []
    saved = os.environ["PATH"]
    bindir = str(Path(sys.executable).parent)
    # the launcher must be found from the interpreter running triage, not from PATH
    kept = [p for p in saved.split(os.pathsep) if p != bindir]
    # ...but ninja stays the one the DeepSpeed ops were built with (`make test` builds them
    # with the venv's): ninja 1.11 and 1.13 keep incompatible logs, each rebuilds all.
    ninja = Path(bindir) / "ninja"
    if ninja.exists():
        shim = tmp_path_factory.mktemp("ninja-only")
        (shim / "ninja").symlink_to(ninja)
        kept.insert(0, str(shim))
    os.environ["PATH"] = os.pathsep.join(kept)
    try:
        result = materialize_case(case, progress=messages.append)
    finally:
        os.environ["PATH"] = saved
    return case, result, messages


@pytest.fixture(scope="session")
def trainlib(tmp_path_factory):
    """The two-revision training-library case and both its runs, launched once per session:
    read by the demo-case test and taken as the baselines of the workflow test on it."""
    from fixtures.trainlib_case import build_trainlib_case

    from triage_agent.config import load_case
    from triage_agent.runs import materialize_case

    toml = build_trainlib_case(tmp_path_factory.mktemp("trainlib"))
    case = load_case(toml)
    return toml, case, materialize_case(case)


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

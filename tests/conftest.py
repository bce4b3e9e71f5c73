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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    _one_worker_per_shared_fixture(items)
    _skip_gpu_without_cuda(items)


def _one_worker_per_shared_fixture(items) -> None:
    """Under ``pytest -n N --dist loadgroup``: the tests that share a module- or session-scoped
    fixture of this suite (the demo's baselines, a module's one launch read by several tests)
    run on one worker, so the fixture is built once, not once per worker that draws one of them.

    Found from the fixtures each test requests, so a new shared fixture needs no marker; tests
    that share two such fixtures join both groups into one. Tests sharing none are spread
    one by one. Without xdist the marker is inert.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    shared: dict[int, list[str]] = {}
    for i, item in enumerate(items):
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        keys = []
        for name in info.names_closure:
            for fdef in info.name2fixturedefs.get(name, ()):
                # the suite's own fixtures only: pytest's built-in session fixtures
                # (tmp_path_factory, ...) have an empty baseid
                if fdef.scope in ("module", "package", "session") and fdef.baseid:
                    keys.append(f"{fdef.baseid}::{name}")
        if keys:
            shared[i] = keys
            for k in keys[1:]:
                parent[find(k)] = find(keys[0])
    for i, keys in shared.items():
        group = find(keys[0]).rsplit("/", 1)[-1]
        items[i].add_marker(pytest.mark.xdist_group(group))


def _skip_gpu_without_cuda(items) -> None:
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

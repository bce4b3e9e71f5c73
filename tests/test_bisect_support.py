"""Shared builders for the bisection tests (no tests here): a small library's real git
history, made with GitPython, and a case whose runs train a tiny plain-torch model with it.

Every process of a run appends the path of the ``lib`` package it is about to import to the file
named by ``BISECT_LAUNCHES``: a probe's line names its worktree, so a test counts what was
launched, and where, from the processes themselves.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import git

from triage_agent.records import Case, RunSpec, SourceSpec

AUTHOR = git.Actor("Lib Dev", "dev@lib.example")

OPS = '''"""Operations of the tiny model."""

import torch


def act(x):
    return torch.tanh(x)


def unused_a(x):
    return x


def unused_b(x):
    return x


def update(w, g, lr):
    return w - lr * g
'''

TRAIN = """import argparse
import importlib.util
import os
import time

import torch

from triage_agent.metrics import MetricLog

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--steps", type=int, default=4)
a = p.parse_args()
# said before the library is imported, so a library that fails to import is counted too
with open(os.environ["BISECT_LAUNCHES"], "a") as f:
    f.write(os.path.realpath(importlib.util.find_spec("lib").origin) + "\\n")
with open(os.environ["BISECT_LAUNCHES"] + ".ext", "a") as f:
    f.write(os.environ.get("TORCH_EXTENSIONS_DIR", "-") + "\\n")
# a test that interrupts a probe holds it here, launched and not yet finished
time.sleep(float(os.environ.get("BISECT_PAUSE", "0")))
from lib import ops  # noqa: E402
torch.manual_seed(0)
torch.set_num_threads(1)
w = torch.randn(8, 8, requires_grad=True)
x = torch.randn(16, 8)
c = torch.randn(16, 8)
with MetricLog(a.out, rank=0) as log:
    for step in range(a.steps):
        loss = (ops.act(x @ w) * c).sum()
        (g,) = torch.autograd.grad(loss, w)
        with torch.no_grad():
            w = ops.update(w, g, 0.1).requires_grad_()
        log.log(step, loss=loss.detach(), grad_norm=g.norm())
"""

# the same functions, computed another way: each changes low-order bits
SIGMOID_ACT = OPS.replace("return torch.tanh(x)", "return 2 * torch.sigmoid(2 * x) - 1")
SCALED_UPDATE = "return (w / lr - g) * lr"
NEUTRAL_DOC = '"""Operations of the tiny model (see README)."""'


def edit(text: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new)
    return text


def commit(repo: git.Repo, files: dict[str, str | None], message: str) -> git.Commit:
    root = Path(repo.working_tree_dir)
    for rel, text in files.items():
        if text is None:
            repo.index.remove([rel], working_tree=True)
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        repo.index.add([rel])
    return repo.index.commit(message, author=AUTHOR, committer=AUTHOR)


def build_repo(
    root: Path, history: list[tuple[str, dict[str, str | None]]], *, script: bool = True
):
    """A repository at ``root``: the library (and ``train.py`` when ``script``) tagged
    ``v-a``, then ``history`` (message, files; None deletes), the last commit tagged ``v-b``."""
    repo = git.Repo.init(root, initial_branch="main")
    files: dict[str, str | None] = {"lib/__init__.py": "", "lib/ops.py": OPS}
    if script:
        files["train.py"] = TRAIN
    entries = [("lib 1.0", files), *((message, changes) for message, changes in history)]
    assert len(entries) > 1, "a history to bisect has at least one commit after v-a"
    # one `git fast-import` stream rather than a commit through the index per entry: the
    # thousand-commit history takes about a second instead of most of a minute
    start = int(time.time()) - len(entries)
    stream = b"".join(
        _fast_import_commit(msg, ch, start + k) for k, (msg, ch) in enumerate(entries)
    )
    with tempfile.TemporaryFile() as f:
        f.write(stream)
        f.seek(0)
        repo.git.fast_import("--quiet", istream=f)
    repo.git.reset("--hard", "main")
    repo.create_tag("v-a", ref=repo.commit(f"main~{len(history)}"))
    repo.create_tag("v-b", ref=repo.commit("main"))
    return repo


def _fast_import_commit(message: str, files: dict[str, str | None], when: int) -> bytes:
    """One commit on main in git's fast-import format, by AUTHOR (None deletes a file)."""

    def data(text: str) -> bytes:
        raw = text.encode()
        return b"data %d\n%s\n" % (len(raw), raw)

    who = f"{AUTHOR.name} <{AUTHOR.email}> {when} +0000\n".encode()
    out = [b"commit refs/heads/main\n", b"author " + who, b"committer " + who, data(message)]
    for rel, text in files.items():
        if text is None:
            out.append(f"D {rel}\n".encode())
        else:
            out += [f"M 100644 inline {rel}\n".encode(), data(text)]
    return b"".join(out)


def make_case(
    tmp: Path, history, *, pythonpath: bool = False, package: bool = False, steps: int = 4
) -> Case:
    """A case whose run A uses the library at ``v-a`` and run B at ``v-b``.

    Without ``pythonpath`` the script is part of the repository and each run works in a
    worktree of its tag; with it the script sits beside the repository and each run puts a
    worktree of its tag on ``PYTHONPATH`` (a package the job imports). With ``package`` the
    script sits beside the repository too, but the case names the package
    (``source.package = "lib"``): triage itself puts a checkout of each run's tag first on
    ``PYTHONPATH``, and the repository's own work tree stays at ``main``."""
    pythonpath = pythonpath or package
    repo = build_repo(tmp / "lib-repo", history, script=not pythonpath)
    launches = tmp / "launches.log"
    for name, tag in () if package else (("run-a", "v-a"), ("run-b", "v-b")):
        repo.git.worktree("add", "--detach", str(tmp / name), tag)
    argv = [["{python}", "train.py", "--out", "{out}", "--steps", str(steps)]]
    runs = {}
    for key, tag in (("a", "v-a"), ("b", "v-b")):
        env = {"BISECT_LAUNCHES": str(launches)}
        cwd = tmp / f"run-{key}"
        if pythonpath:
            cwd = tmp / "job"
            cwd.mkdir(exist_ok=True)
            (cwd / "train.py").write_text(TRAIN)
            if not package:
                env["PYTHONPATH"] = str(tmp / f"run-{key}")
        runs[key] = RunSpec(
            name=key,
            metrics="{out}",
            launch=argv,
            cwd=str(cwd),
            env=env,
            source=SourceSpec(
                repo=str(tmp / "lib-repo"), rev=tag, package="lib" if package else None
            ),
        )
    return Case(
        name="lib-upgrade",
        run_a=runs["a"],
        run_b=runs["b"],
        workspace=str(tmp / "ws"),
        source_roots=[str(tmp)],
        timeout_s=120,
    )


def launched(tmp: Path) -> list[str]:
    """The library path of every process launched so far, in order."""
    log = tmp / "launches.log"
    return log.read_text().splitlines() if log.exists() else []


def extension_dirs(tmp: Path) -> list[str]:
    """The TORCH_EXTENSIONS_DIR of every process launched so far, in order ("-": unset)."""
    log = tmp / "launches.log.ext"
    return log.read_text().splitlines() if log.exists() else []


def probe_launches(tmp: Path) -> list[str]:
    """Those launched in a probe's throwaway worktree (not the runs' own checkouts)."""
    return [p for p in launched(tmp) if not p.startswith(str(tmp))]


ONE_BAD = [
    ("docs: readme", {"README.md": "# lib\n"}),
    ("ops: import a helper", {"lib/ops.py": "import does_not_exist_anywhere\n" + OPS}),
    ("ops: drop the helper again", {"lib/ops.py": OPS}),
    ("ops: sigmoid form of tanh", {"lib/ops.py": SIGMOID_ACT}),
    ("docs: changelog", {"CHANGES.md": "- sigmoid\n"}),
]

INTERACTING = [
    ("ops: sigmoid form of tanh", {"lib/ops.py": SIGMOID_ACT}),
    ("docs: readme", {"README.md": "# lib\n"}),
    (
        "ops: scaled update, and a docstring",
        {
            "lib/ops.py": edit(
                SIGMOID_ACT,
                ("return w - lr * g", SCALED_UPDATE),
                ('"""Operations of the tiny model."""', NEUTRAL_DOC),
            )
        },
    ),
]


def write_case_toml(case: Case, path: Path) -> Path:
    """The case as a person writes it in ``triage.toml`` (absolute paths kept as they are)."""
    q = json.dumps
    lines = [
        "[case]",
        f"name = {q(case.name)}",
        f"workspace = {q(case.workspace)}",
        f"source_roots = {q(case.source_roots)}",
        f"timeout_s = {case.timeout_s}",
    ]
    for key, run in (("a", case.run_a), ("b", case.run_b)):
        env = ", ".join(f"{k} = {q(v)}" for k, v in run.env.items())
        lines += [
            f"[runs.{key}]",
            f"metrics = {q(run.metrics)}",
            f"cwd = {q(run.cwd)}",
            f"launch = {q(run.launch)}",
            f"env = {{ {env} }}",
            f"[runs.{key}.source]",
            f"repo = {q(run.source.repo)}",
            f"rev = {q(run.source.rev)}",
            *([f"package = {q(run.source.package)}"] if run.source.package else []),
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def make_merge_case(tmp: Path) -> Case:
    """B's history brings the bits-changing commit in through a merge: main gets a note,
    a side branch gets a note then the change, main gets another note, the side branch is
    merged (no fast-forward), and one more note follows."""
    case = make_case(tmp, [("notes: one", {"NOTES.md": "1\n"})])
    repo = git.Repo(tmp / "lib-repo")
    repo.git.checkout("-b", "side", "v-b")
    commit(repo, {"SIDE.md": "side\n"}, "side: notes")
    commit(repo, {"lib/ops.py": SIGMOID_ACT}, "side: sigmoid form of tanh")
    repo.git.checkout("main")
    commit(repo, {"NOTES.md": "1\n2\n"}, "notes: two")
    ident = {
        "GIT_AUTHOR_NAME": AUTHOR.name,
        "GIT_AUTHOR_EMAIL": AUTHOR.email,
        "GIT_COMMITTER_NAME": AUTHOR.name,
        "GIT_COMMITTER_EMAIL": AUTHOR.email,
    }
    repo.git.merge("--no-ff", "-m", "merge side", "side", env=ident)
    tip = commit(repo, {"NOTES.md": "1\n2\n3\n"}, "notes: three")
    repo.git.worktree("remove", "--force", str(tmp / "run-b"))
    repo.git.worktree("add", "--detach", str(tmp / "run-b"), tip.hexsha)
    b = case.run_b.model_copy(update={"source": SourceSpec(repo=str(tmp / "lib-repo"), rev="main")})
    return case.model_copy(update={"run_b": b})

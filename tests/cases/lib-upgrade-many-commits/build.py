"""Builds the case's repository: ``minitrain``, a small training library, with twelve
commits between tag v1.0 (run A's revision) and tag v1.1 (run B's), and a worktree of each
tag (``run-a``, ``run-b``).

    python build.py        # in the case directory; idempotent only on a fresh copy

The history is a real one, made with GitPython: documentation, a refactor, tests, a
version bump, logging, and changes to the model and the optimizer.
"""

from pathlib import Path

import git

AUTHOR = git.Actor("Minitrain Dev", "dev@minitrain.example")

MODEL = '''\
"""A pre-norm residual MLP for sequence regression."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Regressor(nn.Module):
    def __init__(self, features: int = 10, width: int = 32, depth: int = 2) -> None:
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.blocks = nn.Sequential(*(Block(width) for _ in range(depth)))
        self.out = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.blocks(self.inp(x))).squeeze(-1)
'''

OPTIM = '''\
"""Adam with decoupled weight decay, written out so the update is easy to read."""

import math

import torch


class Adam:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.state = {id(p): (torch.zeros_like(p), torch.zeros_like(p)) for p in self.params}
        self.t = 0

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        bc1, bc2 = 1 - b1**self.t, 1 - b2**self.t
        for p in self.params:
            m, v = self.state[id(p)]
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            p.mul_(1 - self.lr * self.wd)
            denom = (v.sqrt() / math.sqrt(bc2)).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / bc1)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
'''

DATA = '''\
"""Synthetic regression data: batch i is drawn from its own generator."""

import torch


def batch(i: int, size: int = 64, features: int = 10):
    g = torch.Generator().manual_seed(4242 + i)
    x = torch.randn(size, features, generator=g)
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1] * x[:, 2]
    return x, y
'''

LOOP = '''\
"""The training loop."""

import torch.nn.functional as F

from .data import batch


def train(model, opt, steps: int, log) -> None:
    for step in range(steps):
        x, y = batch(step)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
'''

TRAIN = '''\
"""Train the regressor with minitrain and log metric fingerprints.

    python train.py --out DIR --steps 6
"""

import argparse

import torch

from minitrain.loop import train
from minitrain.model import Regressor
from minitrain.optim import Adam
from triage_agent.metrics import MetricLog


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(17)
    model = Regressor()
    opt = Adam(model.parameters(), lr=2e-3, weight_decay=0.01)
    with MetricLog(args.out, rank=0) as log:
        train(model, opt, args.steps, log)


if __name__ == "__main__":
    main()
'''

TEST = """\
from minitrain.data import batch


def test_batches_repeat():
    assert batch(3)[0].equal(batch(3)[0])
"""


def history() -> list[tuple[str, dict[str, str]]]:
    """(message, files written) per commit after v1.0, oldest first."""
    loop_logged = LOOP.replace(
        '"""The training loop."""\n',
        '"""The training loop."""\n\nimport logging\n',
    ).replace(
        "        log.log(step, loss=loss.detach())\n",
        "        log.log(step, loss=loss.detach())\n"
        '        logging.getLogger("minitrain").debug("step %d done", step)\n',
    )
    data_split = DATA.replace(
        "def batch(i: int, size: int = 64, features: int = 10):\n"
        "    g = torch.Generator().manual_seed(4242 + i)\n",
        "def _generator(i: int) -> torch.Generator:\n"
        "    return torch.Generator().manual_seed(4242 + i)\n\n\n"
        "def batch(i: int, size: int = 64, features: int = 10):\n"
        "    g = _generator(i)\n",
    )
    tanh_gelu = MODEL.replace("F.gelu(self.up(", 'F.gelu(approximate="tanh", input=self.up(')
    folded = OPTIM.replace(
        "            denom = (v.sqrt() / math.sqrt(bc2)).add_(self.eps)\n"
        "            p.addcdiv_(m, denom, value=-self.lr / bc1)\n",
        "            # one division fewer per element: fold the bias corrections into the step\n"
        "            denom = v.sqrt().add_(self.eps * math.sqrt(bc2))\n"
        "            p.addcdiv_(m, denom, value=-self.lr * math.sqrt(bc2) / bc1)\n",
    )
    return [
        ("docs: README with a usage example", {"README.md": "# minitrain\n\nSee train.py.\n"}),
        ("tests: data batches repeat", {"tests/test_data.py": TEST}),
        ("data: factor the generator out of batch()", {"minitrain/data.py": data_split}),
        (
            "model: tanh-approximate GELU (matches the fused kernels)",
            {"minitrain/model.py": tanh_gelu},
        ),
        ("loop: debug log line per step", {"minitrain/loop.py": loop_logged}),
        ("docs: describe the optimizer", {"README.md": "# minitrain\n\nAdam, written out.\n"}),
        ("ci: lint config", {"ruff.toml": "line-length = 100\n"}),
        ("optim: fold the bias corrections into the step size", {"minitrain/optim.py": folded}),
        (
            "tests: optimizer smoke test",
            {"tests/test_optim.py": "def test_nothing():\n    pass\n"},
        ),
        ("docs: changelog", {"CHANGELOG.md": "## 1.1\n\n- faster optimizer step\n"}),
        ("packaging: version 1.1", {"minitrain/__init__.py": '__version__ = "1.1"\n'}),
        ("docs: typo", {"CHANGELOG.md": "## 1.1\n\n- a faster optimizer step\n"}),
    ]


def commit(repo: git.Repo, files: dict[str, str], message: str) -> git.Commit:
    root = Path(repo.working_tree_dir)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    repo.index.add(list(files))
    return repo.index.commit(message, author=AUTHOR, committer=AUTHOR)


def main() -> None:
    here = Path(__file__).resolve().parent
    repo = git.Repo.init(here / "minitrain-repo", initial_branch="main")
    first = commit(
        repo,
        {
            "minitrain/__init__.py": '__version__ = "1.0"\n',
            "minitrain/model.py": MODEL,
            "minitrain/optim.py": OPTIM,
            "minitrain/data.py": DATA,
            "minitrain/loop.py": LOOP,
            "train.py": TRAIN,
        },
        "minitrain 1.0: regressor, Adam, loop",
    )
    repo.create_tag("v1.0", ref=first)
    last = first
    for message, files in history():
        last = commit(repo, files, message)
    repo.create_tag("v1.1", ref=last)
    for name, tag in (("run-a", "v1.0"), ("run-b", "v1.1")):
        repo.git.worktree("add", "--detach", str(here / name), tag)


if __name__ == "__main__":
    main()

"""Environment provenance: the versions, hardware, sources and variables that change numerics."""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
from importlib import metadata
from pathlib import Path

from .records import Provenance

# Variables that change which kernels, algorithms or reduction orders run.
NUMERIC_ENV_EXACT = (
    "CUBLAS_WORKSPACE_CONFIG",
    "CUBLASLT_WORKSPACE_SIZE",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_VISIBLE_DEVICES",
    "PYTHONHASHSEED",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "TORCH_CUDNN_V8_API_DISABLED",
    "NVIDIA_TF32_OVERRIDE",
    "TRITON_CACHE_DIR",
    "DS_ACCELERATOR",
    "WORLD_SIZE",
    "ATEN_CPU_CAPABILITY",
    "OPENBLAS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
NUMERIC_ENV_PREFIXES = (
    *("NCCL_", "NVTE_", "TORCH_NCCL_", "CUDNN_", "CUBLAS", "TORCHINDUCTOR_"),
    *("MKL_", "KMP_", "DNNL_", "ONEDNN_"),
)


def numeric_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {
        k: v
        for k, v in sorted(env.items())
        if k in NUMERIC_ENV_EXACT or k.startswith(NUMERIC_ENV_PREFIXES)
    }


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_info(
    repo_path: str | os.PathLike[str], workspace: str | os.PathLike[str] | None = None
) -> dict[str, object]:
    """Revision and dirty flag of a repository through GitPython; never raises.

    ``workspace`` is this tool's own directory (the ledger, the runs it launched): when it
    lies inside the repository, what it holds is the tool's output, not a change to the code
    that ran, so it is left out of the dirty check and the record says so
    (``dirty_excludes``, paths relative to the repository root)."""
    import git

    try:
        repo = git.Repo(Path(repo_path), search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return {"error": "not a git repository"}
    try:
        rev = repo.head.commit.hexsha
    except ValueError:
        rev = None
    root = Path(str(repo.working_tree_dir)).resolve()
    excludes: list[str] = []
    if workspace is not None:
        try:
            rel = Path(workspace).resolve().relative_to(root)
        except ValueError:
            rel = None  # outside the repository: nothing of it is in the check
        if rel is not None and rel.parts:
            excludes.append(rel.as_posix())
    info: dict[str, object] = {
        "root": str(repo.working_tree_dir),
        "rev": rev,
        "branch": None if repo.head.is_detached else repo.active_branch.name,
    }
    try:
        # staged, unstaged and untracked changes, as is_dirty(untracked_files=True) sees
        # them, over the whole tree but the excluded paths
        spec = [":(top)", *(f":(exclude,top,literal){e}" for e in excludes)]
        status = repo.git.status("--porcelain", "--untracked-files=normal", "--", *spec)
        info["dirty"] = bool(status.strip())
    except git.GitCommandError as exc:
        info["dirty"] = None
        info["error"] = " ".join(str(exc).split())[:300]
    if excludes:
        info["dirty_excludes"] = excludes
    return info


def capture(
    repos: dict[str, str] | None = None,
    environ: dict[str, str] | None = None,
    import_torch: bool = True,
    workspace: str | os.PathLike[str] | None = None,
) -> Provenance:
    """What a launch ran with; ``workspace`` (this tool's directory) is left out of each
    repository's dirty check (see :func:`git_info`)."""
    torch_v = cuda_v = nccl_v = gpu = None
    if import_torch:
        import torch

        torch_v = torch.__version__
        cuda_v = torch.version.cuda
        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
            try:
                nccl_v = ".".join(map(str, torch.cuda.nccl.version()))
            except Exception:  # noqa: BLE001 - a build without NCCL reports none
                nccl_v = None
    else:
        torch_v = _version("torch")
    return Provenance(
        python=re.sub(r"\s.*", "", sys.version),
        platform=platform.platform(),
        hostname=socket.gethostname(),
        torch=torch_v,
        cuda=cuda_v,
        nccl=nccl_v,
        deepspeed=_version("deepspeed"),
        gpu=gpu,
        git={name: git_info(path, workspace) for name, path in (repos or {}).items()},
        env=numeric_env(environ),
    )

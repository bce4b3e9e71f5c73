"""Helpers shared by every template; the generator inlines this file into each generated
reproducer so that the result is one standalone program (stdlib + torch/DeepSpeed only).

Digests here are sha256 over the tensor's raw bytes (``tensor.view(torch.uint8)``): the
byte-level truth, slower than the tracer's on-device digest but independent of it.
Limits: spawned ranks share this host; a rank that hangs is killed after its timeout and
reported as ``timeout``, never waited on forever.
"""

import hashlib
import json
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import time
import traceback

OUTPUT_SCHEMA = "triage.reproducer/1"


def load_params(embedded):
    """The generator embeds the parameters; ``--params FILE`` overrides them for manual runs."""
    if "--params" in sys.argv:
        with open(sys.argv[sys.argv.index("--params") + 1]) as f:
            return json.load(f)
    return dict(embedded)


def sha(t):
    """sha256 of a tensor's raw bytes (bit patterns: -0.0 differs from 0.0, bf16 from fp32)."""
    import torch

    flat = t.detach().contiguous().cpu().reshape(-1)
    return hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


def bits_differ(a, b):
    """Number of elements whose bit patterns differ (tensors of equal shape and dtype)."""
    import torch

    ia = a.detach().contiguous().cpu().reshape(-1)
    ib = b.detach().contiguous().cpu().reshape(-1)
    if ia.dtype != ib.dtype or ia.numel() != ib.numel():
        return -1
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[ia.element_size()]
    return int((ia.view(width) != ib.view(width)).sum())


def emit(
    template, status, supported, compared, digests=None, details=None, notes=None, params=None
):
    """Print the one result line. Only rank 0 prints when launched as several ranks."""
    if os.environ.get("RANK", "0") != "0":
        return
    out = {
        "schema": OUTPUT_SCHEMA,
        "template": template,
        "status": status,
        "supported": supported,
        "compared": compared,
        "digests": digests or {},
        "details": details or {},
        "notes": notes or [],
        "params": params or {},
    }
    sys.stdout.write(json.dumps(out, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def run_guarded(template, params, main):
    """Run ``main(params)``; an exception becomes a status=error line and exit code 1."""
    try:
        main(params)
    except Exception as exc:  # noqa: BLE001 - reported as the reproducer's own failure
        tb = traceback.format_exc().strip().splitlines()
        emit(
            template,
            "error",
            None,
            "nothing: the reproducer failed before deciding",
            details={"exception": f"{type(exc).__name__}: {exc}"[:2000], "traceback": tb[-12:]},
            params=params,
        )
        sys.exit(1)
    finally:
        _tear_down_group()


def _tear_down_group():
    """Destroy a process group the reproducer left open before the interpreter exits.

    A process that exits with gloo's threads alive can abort ("terminate called without an
    active exception", exit -6) after it printed its result, which reads as a crash.
    """
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - teardown must never replace the result
        pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def single_rank_env():
    """torch.distributed env for one rank when no launcher set it (DeepSpeed needs a group)."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")


def _rank_entry(fn, rank, world_size, port, out_path, args):
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
    )
    try:
        result = {"status": "ok", "value": fn(rank, world_size, *args)}
    except BaseException as exc:  # noqa: BLE001 - a crash on one rank is an observation
        result = {
            "status": "exception",
            "exception": f"{type(exc).__name__}: {exc}"[:2000],
            "traceback": traceback.format_exc().strip().splitlines()[-8:],
        }
    with open(out_path + ".tmp", "w") as f:
        json.dump(result, f, default=str)
    os.replace(out_path + ".tmp", out_path)


def spawn_ranks(fn, world_size, timeout_s, args=()):
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes.

    Returns one dict per rank: status ok (with ``value``), exception, timeout (the rank was
    still running at the deadline and was killed) or died (exit without a result).
    """
    ctx = multiprocessing.get_context("spawn")
    port = free_port()
    # the system temp dir (TMPDIR), not the current directory: the result files are
    # scratch, and a run from a source tree must not leave them behind there
    tmp = tempfile.mkdtemp(prefix="triage-ranks-")
    try:
        procs = []
        for rank in range(world_size):
            path = os.path.join(tmp, f"rank{rank}.json")
            p = ctx.Process(
                target=_rank_entry, args=(fn, rank, world_size, port, path, tuple(args))
            )
            p.start()
            procs.append((p, path))
        deadline = time.monotonic() + timeout_s
        for p, _ in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        results = []
        for p, path in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
                results.append({"status": "timeout", "after_s": timeout_s})
            elif os.path.exists(path):
                with open(path) as f:
                    results.append(json.load(f))
            else:
                results.append({"status": "died", "exitcode": p.exitcode})
        return results
    finally:
        # a leftover scratch dir under TMPDIR is harmless; a cleanup error must not
        # replace the ranks' results
        shutil.rmtree(tmp, ignore_errors=True)

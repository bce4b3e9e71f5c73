"""reduction_order: does all_reduce(SUM) give the bytes of a fixed-order sum?

Hypothesis: "the collective's reduction order (ring/tree, chunking, backend) causes a bitwise
difference against a fixed left-to-right order of the same per-rank tensors".
``supported: true``  on some rank the all_reduce result differs from ``((x0 + x1) + x2) ...``
                     computed locally in the same dtype, or the ranks disagree among themselves;
``supported: false`` every rank's result equals the fixed-order sum bit for bit;
``supported: null``  never (an unusable backend/device is status ``skipped`` or ``error``).
``details.order_sensitive`` says whether the values are sensitive to order at all (the
fixed order vs its reverse); with 2 ranks a + b == b + a, so order cannot matter there.
Runs itself as ``world_size`` spawned ranks, or as the current rank when a launcher
(torchrun, deepspeed) set WORLD_SIZE > 1. Each rank's inputs are exchanged with all_gather,
which copies bytes and does no arithmetic.
"""

import os

from _common import emit, load_params, run_guarded, sha, spawn_ranks

TEMPLATE = "reduction_order"
PARAMS: dict = {}
N = 1 << 16


def rank_body(rank, world_size, backend, dtype_name, gather=False):
    """One rank's sums. With ``gather`` every rank's result comes back (to all ranks) through
    the same group: a second group on the same store could read the first one's stale
    addresses."""
    import torch
    import torch.distributed as dist

    dtype = getattr(torch, dtype_name)
    if backend == "nccl":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend, rank=rank, world_size=world_size)
    try:
        g = torch.Generator().manual_seed(100 + rank)
        # Magnitudes spread over six decades, so that the order of additions matters.
        scale = torch.pow(10.0, torch.empty(N).uniform_(-3, 3, generator=g))
        x = (torch.randn(N, generator=g) * scale).to(dtype).to(device)
        parts = [torch.empty_like(x) for _ in range(world_size)]
        dist.all_gather(parts, x)
        reduced = x.clone()
        dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
        fixed = parts[0].clone()
        for p in parts[1:]:
            fixed = fixed + p
        reverse = parts[-1].clone()
        for p in reversed(parts[:-1]):
            reverse = reverse + p
        if device.type == "cuda":
            torch.cuda.synchronize()
        out = {
            "all_reduce": sha(reduced),
            "fixed_order": sha(fixed),
            "reverse_order": sha(reverse),
            "elements_differing": int((reduced.cpu().float() != fixed.cpu().float()).sum()),
            "device": str(device),
        }
        if gather:
            gathered = [None] * world_size
            dist.all_gather_object(gathered, out)
            out = gathered
        dist.barrier()  # no rank tears the group down while a peer still reads
        return out
    finally:
        dist.destroy_process_group()


def decide(params, per_rank):
    dtype = params.get("dtype", "float32")
    backend = params.get("backend", "gloo")
    failed = [r for r in per_rank if r.get("status") != "ok"]
    if failed:
        raise RuntimeError(f"rank failure: {failed[0]}")
    vals = [r["value"] for r in per_rank]
    fixed = vals[0]["fixed_order"]
    differs = [i for i, v in enumerate(vals) if v["all_reduce"] != fixed]
    ranks_agree = len({v["all_reduce"] for v in vals}) == 1
    order_sensitive = vals[0]["fixed_order"] != vals[0]["reverse_order"]
    notes = []
    if not order_sensitive:
        notes.append("these values gave the same bytes in forward and reverse order")
    if len(vals) == 2:
        notes.append("2 ranks: a + b == b + a, the order cannot matter; use world_size >= 3")
    emit(
        TEMPLATE,
        "ok",
        bool(differs) or not ranks_agree,
        f"all_reduce(SUM, {backend}, {dtype}) on {len(vals)} ranks vs a fixed-order local sum",
        {
            "fixed_order": fixed,
            "reverse_order": vals[0]["reverse_order"],
            "all_reduce_per_rank": [v["all_reduce"] for v in vals],
        },
        {
            "ranks_differing_from_fixed_order": differs,
            "elements_differing_per_rank": [v["elements_differing"] for v in vals],
            "ranks_agree": ranks_agree,
            "order_sensitive": order_sensitive,
            "devices": [v["device"] for v in vals],
            "elements": N,
        },
        notes,
        params,
    )


def main(params):
    world_size = int(params.get("world_size", 2))
    backend = params.get("backend", "gloo")
    dtype = params.get("dtype", "float32")
    import torch

    if backend == "nccl" and not torch.cuda.is_available():
        emit(TEMPLATE, "skipped", None, "nothing: nccl needs CUDA devices", params=params)
        return
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched > 1:
        rank = int(os.environ["RANK"])
        gathered = rank_body(rank, launched, backend, dtype, gather=True)
        if rank == 0:
            decide(
                {**params, "world_size": launched}, [{"status": "ok", "value": v} for v in gathered]
            )
        return
    decide(params, spawn_ranks(rank_body, world_size, 240.0, (backend, dtype)))


if __name__ == "__main__":
    run_guarded(TEMPLATE, load_params(PARAMS), main)

"""async_lifetime: can a buffer in use by asynchronous GPU work be overwritten before that
work completes?

Hypothesis: "a buffer handed to asynchronous work (a copy on a side stream, an async NCCL
collective) is reused before ``wait()`` or without ``record_stream``, so the work reads or
writes bytes of another tensor" (the overlap storage-lifetime race in the seed RFC).
``supported: true``  the unsafe pattern produced wrong bytes in at least one trial while the
                     safe pattern (``record_stream`` / ``wait()`` first) was correct in every
                     trial;
``supported: false`` never: not seeing a race in a few trials does not exclude it;
``supported: null``  the unsafe pattern stayed correct (race not observed), or the safe one
                     also failed (the measurement itself is unreliable).
Variants: ``side_stream`` (one GPU): a tensor consumed by a delayed copy on a side stream is
freed without ``record_stream`` and its block reused on the default stream; ``collective``
(two or more GPUs, spawned ranks on NCCL): rank 0 overwrites its all_reduce buffer before
``wait()`` while the peer delays its participation. Limits: CUDA only; ``torch.cuda._sleep``
is used to widen the window deterministically.
"""

from _common import emit, load_params, run_guarded, spawn_ranks

TEMPLATE = "async_lifetime"
PARAMS: dict = {}
TRIALS = 5
N = 1 << 22
SLEEP_CYCLES = 200_000_000


def side_stream_trial(torch, safe):
    side = torch.cuda.Stream()
    src = torch.full((N,), 1.0, device="cuda")
    out = torch.empty(N, device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        out.copy_(src)
    if safe:
        src.record_stream(side)
    del src
    junk = torch.full((N,), 7.0, device="cuda")  # may reuse the freed block at once
    torch.cuda.synchronize()
    del junk
    return int((out != 1.0).sum())


def collective_rank(rank, world_size, safe):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    wrong = []
    for _ in range(TRIALS):
        buf = torch.full((N,), 1.0, device="cuda")
        dist.barrier()
        torch.cuda.synchronize()
        if rank != 0:
            torch.cuda._sleep(SLEEP_CYCLES)  # the peer joins late: rank 0's collective waits
        work = dist.all_reduce(buf, async_op=True)
        if rank == 0:
            if safe:
                work.wait()
            buf.fill_(1000.0)  # reuse of the buffer (before wait() when unsafe)
            if not safe:
                work.wait()
        else:
            work.wait()
        torch.cuda.synchronize()
        expected = float(world_size)
        wrong.append(0 if rank == 0 else int((buf != expected).sum()))
    dist.destroy_process_group()
    return wrong


def main(params):
    import torch

    if not torch.cuda.is_available():
        emit(
            TEMPLATE,
            "skipped",
            None,
            "nothing: needs a CUDA device",
            params=params,
            notes=["needs a CUDA device; run it on a GPU machine"],
        )
        return
    details = {"gpu": torch.cuda.get_device_name(0), "trials": TRIALS, "elements": N}
    variants = {}
    variants["side_stream"] = {
        "unsafe_wrong_elements": [side_stream_trial(torch, False) for _ in range(TRIALS)],
        "safe_wrong_elements": [side_stream_trial(torch, True) for _ in range(TRIALS)],
    }
    if torch.cuda.device_count() >= 2:
        res = {}
        for safe in (False, True):
            ranks = spawn_ranks(collective_rank, 2, 300.0, (safe,))
            bad = [r for r in ranks if r["status"] != "ok"]
            if bad:
                raise RuntimeError(f"collective variant failed: {bad[0]}")
            res["safe" if safe else "unsafe"] = [
                sum(x) for x in zip(*[r["value"] for r in ranks], strict=True)
            ]
        variants["collective"] = {
            "unsafe_wrong_elements": res["unsafe"],
            "safe_wrong_elements": res["safe"],
        }
    else:
        details["collective"] = "not run: needs two GPUs"
    details["variants"] = variants
    decided = {}
    for name, v in variants.items():
        unsafe_bad, safe_bad = any(v["unsafe_wrong_elements"]), any(v["safe_wrong_elements"])
        decided[name] = True if unsafe_bad and not safe_bad else None
    details["per_variant"] = decided
    supported = True if any(decided.values()) else None
    notes = []
    if supported is None:
        notes.append("the race was not observed (or the safe pattern also failed): not decided")
    emit(
        TEMPLATE,
        "ok",
        supported,
        "wrong elements after reusing a buffer in use by async work: unsafe vs safe pattern",
        {},
        details,
        notes,
        params,
    )


if __name__ == "__main__":
    run_guarded(TEMPLATE, load_params(PARAMS), main)

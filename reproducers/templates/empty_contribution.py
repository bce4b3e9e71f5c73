"""empty_contribution: does a norm/clip function break when one rank contributes nothing?

Hypothesis: "a rank with an empty list (every parameter deduplicated away, an idle expert)
makes this function crash, hang, or compute a different value" (DeepSpeed #8912).
``supported: true``  with rank 0 passing ``[]`` some rank raised, hung past the timeout,
                     died, or returned bytes different from the control run;
``supported: false`` every rank returned exactly the control run's bytes;
``supported: null``  the control run itself failed: nothing can be decided.
Control: the same call with rank 0 passing zero tensors of the same shapes as the others
(an empty contribution must behave as a zero contribution). The other ranks pass the same
seeded tensors in both runs. The function is resolved by its dotted path; when it takes an
``mpu`` argument, a minimal model-parallel unit spanning all ranks is passed so that its
cross-rank reduction runs. Each run is its own set of fresh processes with a timeout, so a
hang is a result, not a stuck program. Limits: CPU, gloo; positional call ``f(tensors)``.
"""

import importlib
import inspect

from _common import emit, load_params, run_guarded, sha, spawn_ranks

TEMPLATE = "empty_contribution"
PARAMS: dict = {}
TIMEOUT_S = 60.0


class WorldMpu:
    """Model-parallel unit whose groups are the whole world (what the function reduces over)."""

    def __init__(self, dist):
        self.dist = dist

    def get_model_parallel_group(self):
        return self.dist.group.WORLD

    def get_model_parallel_world_size(self):
        return self.dist.get_world_size()

    def get_model_parallel_rank(self):
        return self.dist.get_rank()

    def get_data_parallel_group(self):
        return self.dist.new_group([self.dist.get_rank()])

    def get_pipeline_model_parallel_world_size(self):
        return 1


def resolve(path):
    module, _, name = path.rpartition(".")
    obj = importlib.import_module(module)
    return getattr(obj, name)


def rank_body(rank, world_size, function, empty_mode):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    if function.startswith("deepspeed."):
        import deepspeed

        # DeepSpeed's own comm layer wraps the torch group; its functions call through it.
        deepspeed.init_distributed(dist_backend="gloo")
    fn = resolve(function)
    g = torch.Generator().manual_seed(50 + rank)
    tensors = [torch.randn(33, generator=g), torch.randn(7, 5, generator=g)]
    if rank == 0:
        tensors = [] if empty_mode == "empty" else [torch.zeros_like(t) for t in tensors]
    kwargs = {}
    if "mpu" in inspect.signature(fn).parameters:
        kwargs["mpu"] = WorldMpu(dist)
    out = fn(tensors, **kwargs)
    dist.barrier()
    dist.destroy_process_group()
    if torch.is_tensor(out):
        return {
            "sha": sha(out),
            "value": out.float().reshape(-1)[:4].tolist(),
            "dtype": str(out.dtype),
        }
    return {"sha": None, "value": repr(out)[:200]}


def main(params):
    world_size = int(params.get("world_size", 2))
    function = params.get("function", "deepspeed.runtime.utils.get_global_norm_of_tensors")
    resolve(function)  # an unknown function is the reproducer's error, not an observation
    control = spawn_ranks(rank_body, world_size, TIMEOUT_S, (function, "zeros"))
    empty = spawn_ranks(rank_body, world_size, TIMEOUT_S, (function, "empty"))
    outcome = {"control": [r["status"] for r in control], "empty": [r["status"] for r in empty]}
    details = {"outcome": outcome, "timeout_s": TIMEOUT_S, "function": function}
    digests = {
        "control": [
            r.get("value", {}).get("sha") if r["status"] == "ok" else None for r in control
        ],
        "empty": [r.get("value", {}).get("sha") if r["status"] == "ok" else None for r in empty],
    }
    failures = {
        i: r.get("exception") or r["status"] for i, r in enumerate(empty) if r["status"] != "ok"
    }
    if failures:
        details["empty_failures"] = failures
    if any(r["status"] != "ok" for r in control):
        details["control_failures"] = {
            i: r.get("exception") or r["status"] for i, r in enumerate(control)
        }
        emit(
            TEMPLATE,
            "ok",
            None,
            "the control run (zero contribution) failed: nothing decided",
            digests,
            details,
            ["the function fails even without an empty list"],
            params,
        )
        return
    differs = [i for i in range(world_size) if digests["empty"][i] != digests["control"][i]]
    details["ranks_differing_from_control"] = differs
    notes = [f"rank {i}: {why}" for i, why in failures.items()]
    emit(
        TEMPLATE,
        "ok",
        bool(failures) or bool(differs),
        f"{function} with [] on rank 0 vs with zero tensors on rank 0 ({world_size} ranks, gloo)",
        digests,
        details,
        notes,
        params,
    )


if __name__ == "__main__":
    run_guarded(TEMPLATE, load_params(PARAMS), main)

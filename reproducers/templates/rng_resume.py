"""rng_resume: does a DeepSpeed checkpoint, loaded in a fresh process, restore every RNG
stream and the data cursor?

Hypothesis: "resuming from this checkpoint leaves some random stream or the data position
different from the uninterrupted run, so the first step after resume differs bitwise".
``supported: true``  after ``load_checkpoint`` in a fresh process, at least one of: the
                     Python, NumPy, torch CPU, each CUDA device's generator, DeepSpeed's
                     model-parallel RNG tracker, or the next training batch (data cursor)
                     differs from its value in the saving process right after the save;
``supported: false`` every stream and the next batch equal their values at save time;
``supported: null``  never (a failure of either process is status ``error``).
The program decides from what it observes: the saving process trains a tiny model with
dropout for a few steps (drawing from every stream, as data augmentation and dropout do),
saves, and records each stream's state digest and the digest of the batch that would come
next. A fresh process then does what a training script does on resume (seed, build the
engine, ``load_checkpoint``) and records the same things. Nothing about DeepSpeed's
checkpoint contents is assumed. Limits: one rank; the data cursor is the engine's own
training data loader; a stream absent in both processes (no CUDA) is reported ``absent``.
"""

import json
import os
import random
import subprocess
import sys

from _common import emit, free_port, load_params, run_guarded, sha, single_rank_env

TEMPLATE = "rng_resume"
PARAMS: dict = {}
SEED = 1234
STEPS = 3


def seed_all(torch, np):
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)  # seeds every CUDA device too


def build(zero_stage):
    import deepspeed
    import numpy as np
    import torch

    seed_all(torch, np)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.Dropout(0.5), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    )
    g = torch.Generator().manual_seed(7)
    data = torch.utils.data.TensorDataset(
        torch.randn(64, 16, generator=g), torch.randn(64, 4, generator=g)
    )
    config = {
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
        "zero_optimization": {"stage": zero_stage},
        "steps_per_print": 1 << 30,
    }
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    engine, _, loader, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config, training_data=data
    )
    return engine, loader


def observe(engine, loader_iter):
    """Digests of every RNG stream and of the next batch the training loop would consume."""
    import numpy as np
    import torch

    streams = {
        "python": sha_obj(random.getstate()),
        "numpy": sha_obj(np.random.get_state()),
        "torch_cpu": sha(torch.get_rng_state()),
    }
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            streams[f"cuda:{i}"] = sha(torch.cuda.get_rng_state(i))
        try:
            from deepspeed.runtime.activation_checkpointing import checkpointing as ckpt

            tracker = ckpt.get_cuda_rng_tracker().get_states()
            for name, state in sorted(tracker.items()):
                streams[f"ds_tracker:{name}"] = sha(state)
        except (ImportError, AttributeError) as exc:
            streams["ds_tracker"] = f"unreadable: {exc}"
    x, y = next(loader_iter)
    return {
        "streams": streams,
        "next_batch": sha(torch.cat([x.reshape(-1), y.reshape(-1)])),
        "global_steps": int(engine.global_steps),
        "global_samples": int(engine.global_samples),
    }


def sha_obj(obj):
    import hashlib

    import numpy as np

    def norm(o):
        if isinstance(o, np.ndarray):
            return o.tobytes().hex()
        if isinstance(o, tuple | list):
            return [norm(v) for v in o]
        return o

    return hashlib.sha256(json.dumps(norm(obj)).encode()).hexdigest()


def save_phase(params, workdir):
    import numpy as np
    import torch

    engine, loader = build(int(params.get("zero_stage", 1)))
    it = iter(loader)
    for _ in range(STEPS):
        x, y = (t.to(engine.device) for t in next(it))
        # Augmentation-style draws from the host streams, as data pipelines make them.
        x = x + 1e-3 * random.random() + 1e-3 * float(np.random.rand())
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
    engine.save_checkpoint(os.path.join(workdir, "ckpt"), tag="resume")
    return observe(engine, it)


def load_phase(params, workdir):
    engine, loader = build(int(params.get("zero_stage", 1)))
    fresh = observe_streams_only()
    load_path, _ = engine.load_checkpoint(os.path.join(workdir, "ckpt"), tag="resume")
    if load_path is None:
        raise RuntimeError("load_checkpoint found no checkpoint")
    out = observe(engine, iter(loader))
    out["fresh_streams"] = fresh
    return out


def observe_streams_only():
    import numpy as np
    import torch

    return {
        "python": sha_obj(random.getstate()),
        "numpy": sha_obj(np.random.get_state()),
        "torch_cpu": sha(torch.get_rng_state()),
    }


def main(params):
    workdir = os.path.abspath("rng_resume_work")
    os.makedirs(workdir, exist_ok=True)
    if "--phase" in sys.argv and sys.argv[sys.argv.index("--phase") + 1] == "load":
        single_rank_env()
        result = load_phase(params, workdir)
        with open(os.path.join(workdir, "load.json"), "w") as f:
            json.dump(result, f)
        return
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")
    }
    single_rank_env()
    saved = save_phase(params, workdir)
    # A fresh interpreter, as after a restart; its own rendezvous port.
    env["MASTER_PORT"] = str(free_port())
    argv = [sys.executable, os.path.abspath(sys.argv[0]), "--phase", "load"]
    if "--params" in sys.argv:
        argv += ["--params", sys.argv[sys.argv.index("--params") + 1]]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    load_file = os.path.join(workdir, "load.json")
    if proc.returncode != 0 or not os.path.exists(load_file):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise RuntimeError(
            f"the fresh load process failed (rc {proc.returncode}): {' | '.join(tail)}"
        )
    with open(load_file) as f:
        loaded = json.load(f)
    compare = {}
    for name in sorted(set(saved["streams"]) | set(loaded["streams"])):
        a, b = saved["streams"].get(name), loaded["streams"].get(name)
        compare[name] = (
            "restored" if a == b else ("missing after load" if b is None else "NOT restored")
        )
    for name in ("python", "numpy", "torch_cpu"):
        if (
            compare.get(name) == "restored"
            and loaded["fresh_streams"].get(name) == saved["streams"][name]
        ):
            compare[name] = "equal, but already equal before load (not exercised)"
    compare["data_cursor"] = (
        "restored" if saved["next_batch"] == loaded["next_batch"] else "NOT restored"
    )
    if not any(k.startswith("cuda") for k in compare):
        compare["cuda"] = "absent (no CUDA device)"
    not_restored = [k for k, v in compare.items() if v in ("NOT restored", "missing after load")]
    emit(
        TEMPLATE,
        "ok",
        bool(not_restored),
        "each RNG stream and the next training batch: saving process after save vs fresh process after load",
        {"saved": saved, "loaded": {k: v for k, v in loaded.items() if k != "fresh_streams"}},
        {
            "streams": compare,
            "not_restored": not_restored,
            "steps_before_save": STEPS,
            "counters": {
                "global_steps": [saved["global_steps"], loaded["global_steps"]],
                "global_samples": [saved["global_samples"], loaded["global_samples"]],
            },
        },
        [f"{k}: {compare[k]}" for k in not_restored],
        params,
    )


if __name__ == "__main__":
    run_guarded(TEMPLATE, load_params(PARAMS), main)

"""optimizer_init: does a real DeepSpeed engine's optimizer path touch the training state
before the first real step, and is its first update the one a reference optimizer makes?

Hypothesis: "optimizer initialisation has side effects (a step, weight decay, moments or a
step counter advanced) that make the first update differ bitwise" (DeepSpeed #8910, #8471).
``supported: true``  an optimizer step ran during ``deepspeed.initialize``; or after
                     initialisation the master weights, moments or step counters are not
                     those of a fresh optimizer; or the engine's first update equals, bit
                     for bit, torch's update with the step counter already at 1 (not at 0);
``supported: false`` nothing was touched and the first update equals torch's first update
                     (same params, grads and hyperparameters) bit for bit;
``supported: null``  nothing was touched but the first update matches neither reference: an
                     arithmetic difference of the optimizer kernel, not an init side effect.
The engine is built from a DeepSpeed config (the optimizer DeepSpeed itself constructs), one
rank on gloo. Every optimizer step is observed through torch's global step hooks, so the
program does not need to know which optimizer class DeepSpeed picked. Limits: one rank, one
parameter group, a tiny MLP; master weights created from the low-precision copy are reported
as a note (a cast policy), not as a side effect.
"""

from _common import bits_differ, emit, load_params, run_guarded, sha, single_rank_env

TEMPLATE = "optimizer_init"
PARAMS: dict = {}
ULP_KERNEL = 64  # rounding-level disagreement between two Adam kernels (near-zero values)
HYPER = {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1}


def flat(tensors, torch):
    # On the host: the snapshots mix the engine's device and the CPU initial weights.
    return torch.cat([t.detach().float().reshape(-1).cpu() for t in tensors])


def snapshot(opt, torch):
    params, grads, states, steps = [], [], [], []
    for group in opt.param_groups:
        steps.append(group.get("step"))
        for p in group["params"]:
            params.append(p.detach().clone())
            grads.append(None if p.grad is None else p.grad.detach().clone())
            st = opt.state.get(p, {})
            states.append(
                {k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in st.items()}
            )
    return {
        "cls": type(opt).__name__,
        "params": params,
        "grads": grads,
        "states": states,
        "group_steps": steps,
    }


def fresh_state_problems(snap, torch):
    """What differs from a never-stepped optimizer (moments absent or zero, counters 0)."""
    problems = []
    for i, gs in enumerate(snap["group_steps"]):
        if gs not in (None, 0):
            problems.append(f"param_groups[{i}]['step'] == {gs}")
    for i, st in enumerate(snap["states"]):
        for k, v in st.items():
            val = (
                v if not torch.is_tensor(v) else (v.float().abs().max().item() if v.numel() else 0)
            )
            if val not in (0, 0.0, None, False):
                problems.append(f"state[{i}][{k!r}] is {val} (max abs)")
    return problems


def max_ulp(a, b, torch):
    """Largest distance in units of last place between two fp32 tensors (same sign assumed)."""
    ia, ib = (
        a.float().contiguous().view(torch.int32).long(),
        b.float().contiguous().view(torch.int32).long(),
    )
    return int((ia - ib).abs().max()) if a.numel() else 0


def reference_update(p0, grad, hyper, decoupled, prior_steps, torch):
    """torch's (single-tensor) Adam/AdamW on a copy of ``p0`` with ``prior_steps`` zero-grad
    steps already counted (moments still zero, as a zero-gradient step leaves them)."""
    p = p0.detach().clone().float().requires_grad_(True)
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    opt = cls(
        [p],
        lr=hyper["lr"],
        betas=tuple(hyper["betas"]),
        eps=hyper["eps"],
        weight_decay=hyper["weight_decay"],
        foreach=False,
        fused=False,
    )
    if prior_steps:
        opt.state[p] = {
            "step": torch.tensor(float(prior_steps)),
            "exp_avg": torch.zeros_like(p),
            "exp_avg_sq": torch.zeros_like(p),
        }
    p.grad = grad.detach().clone().float()
    opt.step()
    return p.detach()


def main(params):
    single_rank_env()
    import deepspeed
    import torch
    import torch.optim.optimizer as topt

    zero_stage = int(params.get("zero_stage", 1))
    dtype = params.get("dtype", "bf16")
    opt_type = params.get("optimizer", "AdamW")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    init = [p.detach().clone() for p in model.parameters()]
    low = torch.bfloat16 if dtype == "bf16" else torch.float32
    phase = {"name": "init"}
    seen = []

    def pre_hook(opt, args, kwargs):
        seen.append({"phase": phase["name"], "when": "pre", **snapshot(opt, torch)})

    def post_hook(opt, args, kwargs):
        seen.append({"phase": phase["name"], "when": "post", **snapshot(opt, torch)})

    hooks = [
        topt.register_optimizer_step_pre_hook(pre_hook),
        topt.register_optimizer_step_post_hook(post_hook),
    ]
    config = {
        "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": 1,
        "optimizer": {"type": opt_type, "params": {**HYPER, "betas": list(HYPER["betas"])}},
        "zero_optimization": {"stage": zero_stage},
        "bf16": {"enabled": dtype == "bf16"},
        "steps_per_print": 1 << 30,
    }
    # gloo on CPU; on a GPU machine DeepSpeed builds its CUDA optimizer path (FusedAdam).
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    engine, ds_opt, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    phase["name"] = "after_init"
    inner = engine.basic_optimizer
    after_init = snapshot(inner, torch)
    init_steps = [s for s in seen if s["phase"] == "init" and s["when"] == "pre"]

    problems = (
        [f"{len(init_steps)} optimizer step(s) ran inside deepspeed.initialize"]
        if init_steps
        else []
    )
    problems += fresh_state_problems(after_init, torch)
    module_params = list(engine.module.parameters())
    module_changed = [
        i
        for i, (p, q) in enumerate(zip(module_params, init, strict=True))
        if not torch.equal(p.detach(), q.to(p.device, p.dtype))
    ]
    if module_changed:
        problems.append(
            f"module parameters {module_changed} differ from the initial weights (cast to {low})"
        )
    init_flat, init_rounded = flat(init, torch), flat([t.to(low) for t in init], torch)
    master = flat(after_init["params"], torch)
    notes = []
    master_cmp = "not comparable"
    if master.numel() >= init_flat.numel():
        head, pad = master[: init_flat.numel()], master[init_flat.numel() :]
        if torch.equal(head, init_flat):
            master_cmp = "equal to the fp32 initial weights"
        elif torch.equal(head, init_rounded):
            master_cmp = f"equal to the initial weights rounded to {low}"
            if low != torch.float32:
                notes.append(
                    f"master weights are created from the {low} copy: a cast policy, not a side effect"
                )
        else:
            master_cmp = "different from the initial weights"
            problems.append(
                f"{bits_differ(head, init_rounded)} master-weight elements changed before the first step"
            )
        if pad.numel() and bool(pad.ne(0).any()):
            problems.append("padding of the flat master partition is not zero")
    else:
        notes.append(
            f"master weights hold {master.numel()} elements for {init_flat.numel()} parameters"
        )

    # One real step on a fixed batch.
    phase["name"] = "first_step"
    g = torch.Generator().manual_seed(1)
    first = next(engine.module.parameters())
    x = torch.randn(8, 16, generator=g).to(device=first.device, dtype=first.dtype)
    y = torch.randn(8, 4, generator=g).to(device=first.device, dtype=first.dtype)
    loss = torch.nn.functional.mse_loss(engine(x).float(), y.float())
    engine.backward(loss)
    engine.step()
    for h in hooks:
        h.remove()
    pre = [s for s in seen if s["phase"] == "first_step" and s["when"] == "pre"]
    post = [s for s in seen if s["phase"] == "first_step" and s["when"] == "post"]

    details = {
        "device": str(next(engine.module.parameters()).device),
        "optimizer_class": after_init["cls"],
        "deepspeed_optimizer": type(ds_opt).__name__,
        "init_steps": len(init_steps),
        "master_weights_after_init": master_cmp,
        "state_problems": problems,
        "first_step_optimizer_calls": len(pre),
    }
    digests = {"init_weights": sha(init_flat), "master_after_init": sha(master)}
    update_match = None
    if len(pre) == 1 and len(post) == 1 and all(gr is not None for gr in pre[0]["grads"]):
        decoupled = bool(getattr(inner, "adam_w_mode", isinstance(inner, torch.optim.AdamW)))
        group = inner.param_groups[0]
        hyper = {k: group[k] for k in ("lr", "betas", "eps", "weight_decay")}
        engine_out = flat(post[0]["params"], torch)
        ref1 = flat(
            [
                reference_update(p, gr, hyper, decoupled, 0, torch)
                for p, gr in zip(pre[0]["params"], pre[0]["grads"], strict=True)
            ],
            torch,
        )
        ref2 = flat(
            [
                reference_update(p, gr, hyper, decoupled, 1, torch)
                for p, gr in zip(pre[0]["params"], pre[0]["grads"], strict=True)
            ],
            torch,
        )
        digests.update(
            engine_first_update=sha(engine_out),
            reference_step1=sha(ref1),
            reference_step2=sha(ref2),
        )
        details.update(
            reference=("AdamW" if decoupled else "Adam") + " (torch, foreach=False)",
            elements_differing_from_step1=bits_differ(engine_out, ref1),
            elements_differing_from_step2=bits_differ(engine_out, ref2),
            hyperparameters={k: (list(v) if isinstance(v, tuple) else v) for k, v in hyper.items()},
        )
        update_match = (
            "step1"
            if torch.equal(engine_out, ref1)
            else "step2"
            if torch.equal(engine_out, ref2)
            else "neither"
        )
        ulp1, ulp2 = max_ulp(engine_out, ref1, torch), max_ulp(engine_out, ref2, torch)
        details.update(max_ulp_from_step1=ulp1, max_ulp_from_step2=ulp2)
        if update_match == "neither" and ulp1 <= ULP_KERNEL and ulp2 > 100 * max(ulp1, 1):
            # Bits differ only at kernel-rounding level from the step-1 update, and the
            # step-2 update is far away: the counter was not advanced.
            update_match = "step1~"
            notes.append(
                f"first update is within {ulp1} ulp of torch's step-1 update (kernel "
                f"arithmetic) and {ulp2} ulp from the step-2 update"
            )
        details["first_update_matches"] = update_match
    else:
        notes.append("the first optimizer step could not be observed through torch's step hooks")

    if problems or update_match == "step2":
        supported = True
        if update_match == "step2":
            problems.append(
                "the first update equals torch's update with the step counter already advanced"
            )
    elif update_match in ("step1", "step1~"):
        supported = False
    else:
        supported = None
        if update_match == "neither":
            notes.append(
                "no init side effect seen, but the first update matches neither reference: "
                "an optimizer arithmetic difference (a policy), not this hypothesis"
            )
    emit(
        TEMPLATE,
        "ok",
        supported,
        "state before the first step vs a fresh optimizer; first update vs torch's Adam(W) at step 1 and 2",
        digests,
        details,
        notes,
        params,
    )


if __name__ == "__main__":
    run_guarded(TEMPLATE, load_params(PARAMS), main)

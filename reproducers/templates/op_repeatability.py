"""op_repeatability: does one op, run N times on identical inputs, give identical bytes?

Hypothesis: "this op is run-to-run nondeterministic on this device and so causes a bitwise
difference between two runs" (atomics in index_add_/scatter_add_ on CUDA, split-K GEMMs).
``supported: true``  at least two of the N runs produced different output bytes;
``supported: false`` all N outputs are bitwise equal (N is small: a rare race may hide);
``supported: null``  never (an unusable device is status ``skipped``).
With ``deterministic`` the program sets CUBLAS_WORKSPACE_CONFIG=:4096:8 before torch starts
CUDA and calls torch.use_deterministic_algorithms(True); an op with no deterministic
implementation then raises, which is reported in ``details`` and decides nothing.
Inputs are synthetic, seeded, with many duplicate indices so atomics collide.
"""

import os

from _common import emit, load_params, run_guarded, sha

TEMPLATE = "op_repeatability"
PARAMS: dict = {}


def build(op, device, torch):
    """Seeded synthetic inputs and a closure that runs the op once on fresh copies."""
    g = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device)

    if op in ("index_add_", "scatter_add_", "index_put_", "embedding_backward"):
        rows, cols, n = 64, 256, 1 << 16
        src = randn(n, cols)
        idx = torch.randint(0, rows, (n,), generator=g).to(device)
        base = torch.zeros(rows, cols, device=device)
        if op == "index_add_":
            return lambda: base.clone().index_add_(0, idx, src)
        if op == "scatter_add_":
            idx2 = idx.unsqueeze(1).expand(n, cols).contiguous()
            return lambda: base.clone().scatter_add_(0, idx2, src)
        if op == "index_put_":
            return lambda: base.clone().index_put_((idx,), src, accumulate=True)
        weight = randn(rows, cols).requires_grad_(True)

        def emb():
            weight.grad = None
            torch.nn.functional.embedding(idx, weight).backward(src)
            return weight.grad.clone()

        return emb
    if op == "matmul":
        a, b = randn(1024, 4096), randn(4096, 1024)
        return lambda: a @ b
    if op == "bmm":
        a, b = randn(16, 256, 1024), randn(16, 1024, 256)
        return lambda: torch.bmm(a, b)
    if op == "sum":
        x = randn(1 << 22)
        return lambda: x.sum()
    if op == "cumsum":
        x = randn(1 << 20)
        return lambda: x.cumsum(0)
    raise ValueError(f"no synthetic input builder for op {op!r}")


def main(params):
    op = params.get("op", "index_add_")
    device = params.get("device", "cpu")
    repeats = int(params.get("repeats", 5))
    deterministic = bool(params.get("deterministic", False))
    if deterministic:
        # Must be set before CUDA/cuBLAS initialises; torch is imported after this line.
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        emit(
            TEMPLATE,
            "skipped",
            None,
            "nothing: no CUDA device",
            params=params,
            notes=["needs a CUDA device; run it on a GPU machine"],
        )
        return
    torch.use_deterministic_algorithms(deterministic)
    run = build(op, device, torch)
    digests, errors = [], []
    for _ in range(repeats):
        try:
            out = run()
        except RuntimeError as exc:
            errors.append(str(exc).splitlines()[0][:500])
            break
        if device == "cuda":
            torch.cuda.synchronize()
        digests.append(sha(out))
    details = {
        "device": device,
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "runs": len(digests),
        "distinct_outputs": len(set(digests)),
    }
    if errors:
        details["op_error"] = errors[0]
        emit(
            TEMPLATE,
            "ok",
            None,
            f"{op} could not run under this policy",
            {"runs": digests},
            details,
            ["the op raised under this policy: nothing decided"],
            params,
        )
        return
    supported = len(set(digests)) > 1
    emit(
        TEMPLATE,
        "ok",
        supported,
        f"output bytes of {repeats} runs of {op} on identical inputs ({device})",
        {"runs": digests},
        details,
        [] if supported else [f"{repeats} runs agreed; a rarer race is not excluded"],
        params,
    )


if __name__ == "__main__":
    run_guarded(TEMPLATE, load_params(PARAMS), main)

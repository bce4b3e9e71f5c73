"""cast_roundtrip: does rounding reduced values to a low dtype before fp32 accumulation
change the accumulated bytes?

Hypothesis: "a bf16/fp16 round trip of reduced values before fp32 accumulation causes a
bitwise difference" (the class of DeepSpeed #8913).
``supported: true``  the fp32 accumulator fed with ``x.to(low).float()`` differs in at least
                     one bit from the accumulator fed with ``x`` itself;
``supported: false`` both accumulators are bitwise equal;
``supported: null``  no value was non-representable in the low dtype (nothing was tested).
The values are sums of two "rank" partials in fp32 (as a reduction produces them), checked
to be non-representable in the low dtype; accumulation runs over several micro-steps as in
gradient accumulation. Limits: synthetic values, CPU; the effect is arithmetic, not device.
"""

import torch
from _common import bits_differ, emit, load_params, run_guarded, sha

TEMPLATE = "cast_roundtrip"
PARAMS: dict = {}


def main(params):
    low = {"bfloat16": torch.bfloat16, "float16": torch.float16}[
        params.get("low_dtype", "bfloat16")
    ]
    n = int(params.get("n", 4096))
    micro_steps = 4
    g = torch.Generator().manual_seed(1234)
    acc_fp32 = torch.zeros(n, dtype=torch.float32)
    acc_rt = torch.zeros(n, dtype=torch.float32)
    nonrep = 0
    for _ in range(micro_steps):
        part0 = torch.randn(n, generator=g, dtype=torch.float32) * 1e-2
        part1 = torch.randn(n, generator=g, dtype=torch.float32) * 1e-2
        reduced = part0 + part1  # a 2-rank sum, in fp32
        rounded = reduced.to(low).to(torch.float32)
        nonrep += int((rounded != reduced).sum())
        acc_fp32 += reduced
        acc_rt += rounded
    total = n * micro_steps
    details = {
        "values": total,
        "non_representable_in_low_dtype": nonrep,
        "elements_differing": bits_differ(acc_fp32, acc_rt),
        "max_abs_diff": float((acc_fp32 - acc_rt).abs().max()),
        "micro_steps": micro_steps,
    }
    digests = {"accumulate_fp32": sha(acc_fp32), "accumulate_after_roundtrip": sha(acc_rt)}
    if nonrep == 0:
        supported, notes = None, ["every value was exactly representable: nothing was tested"]
    else:
        supported = digests["accumulate_fp32"] != digests["accumulate_after_roundtrip"]
        notes = [f"{nonrep}/{total} reduced values were not representable in {low}"]
    emit(
        TEMPLATE,
        "ok",
        supported,
        f"fp32 accumulator of reduced values vs of the same values rounded to {low} first",
        digests,
        details,
        notes,
        params,
    )


if __name__ == "__main__":
    run_guarded(TEMPLATE, load_params(PARAMS), main)

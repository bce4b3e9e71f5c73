"""Run B: the same GPT (gpt.py: same initial bytes, same batches) trained by DeepSpeed from
the JSON config it is given (ZeRO stage 1/2, bf16).

    python train_deepspeed.py --out DIR --deepspeed_config zero2.json [--boundaries DIR]

``--decay`` picks the parameters the config's weight decay applies to: every parameter
(DeepSpeed's default when the model's parameters are passed as they are), or only the
matrices (biases and 1-D tensors in a group of their own without decay).
"""

import argparse

import deepspeed
import gpt
import torch

from triage_agent.metrics import MetricLog


def param_groups(model: torch.nn.Module, decay: str) -> list:
    if decay == "all":
        return list(model.parameters())
    named = list(model.named_parameters())
    skip = [p for n, p in named if p.ndim == 1 or n.endswith(".bias")]
    keep = [p for n, p in named if not (p.ndim == 1 or n.endswith(".bias"))]
    return [{"params": keep}, {"params": skip, "weight_decay": 0.0}]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--decay", choices=["all", "matrices"], default="all")
    p.add_argument("--boundaries", default=None)
    p.add_argument("--port", type=int, default=29517, help="the process group's TCP port")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    gpt.init_parallel(args.port)
    model = gpt.build_model(gpt.build_config())
    engine, _, _, _ = deepspeed.initialize(
        model=model,
        model_parameters=param_groups(model, args.decay),
        config=args.deepspeed_config,
    )
    capture = None
    if args.boundaries:
        from triage_agent.correspond.capture import attach_deepspeed

        capture = attach_deepspeed(args.boundaries, engine, outputs=("output_layer",))
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            loss = gpt.loss_of(engine, gpt.batch(step))
            engine.backward(loss)
            engine.step()
            log.log(step, loss=loss.detach())
    if capture is not None:
        capture.close()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

"""Run A, the reference: the tiny GPT of gpt.py trained by megatron-core itself, with its
DistributedDataParallel (fp32 gradient buffers), get_megatron_optimizer (bf16 params, fp32
main params, Adam with decoupled weight decay, Megatron's default parameter groups) and the
OptimizerParamScheduler that Megatron's training loop steps after every update (constant lr
and weight decay here).

    python train_megatron.py --out DIR [--boundaries DIR]

With ``--boundaries`` the state at every corresponding boundary of every step is dumped by
hooks (triage_agent.correspond.capture); the arithmetic is Megatron's, unchanged.
"""

import argparse

import gpt
import torch

from triage_agent.metrics import MetricLog


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip-grad", type=float, default=0.0)
    p.add_argument("--boundaries", default=None)
    p.add_argument("--port", type=int, default=29517, help="the process group's TCP port")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    gpt.init_parallel(args.port)
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    config = gpt.build_config()
    model = DistributedDataParallel(
        config=config,
        ddp_config=DistributedDataParallelConfig(
            grad_reduce_in_fp32=True, overlap_grad_reduce=False, use_distributed_optimizer=False
        ),
        module=gpt.build_model(config),
    )
    optimizer = get_megatron_optimizer(
        OptimizerConfig(
            optimizer="adam",
            lr=args.lr,
            weight_decay=args.weight_decay,
            adam_beta1=0.9,
            adam_beta2=0.95,
            adam_eps=1e-8,
            bf16=True,
            params_dtype=torch.bfloat16,
            clip_grad=args.clip_grad,
            use_distributed_optimizer=False,
        ),
        [model],
    )
    scheduler = OptimizerParamScheduler(
        optimizer,
        init_lr=args.lr,
        max_lr=args.lr,
        min_lr=args.lr,
        lr_warmup_steps=0,
        lr_decay_steps=args.steps,
        lr_decay_style="constant",
        start_wd=args.weight_decay,
        end_wd=args.weight_decay,
        wd_incr_steps=args.steps,
        wd_incr_style="constant",
    )
    capture = None
    if args.boundaries:
        from triage_agent.correspond.capture import attach_megatron

        capture = attach_megatron(args.boundaries, model, optimizer, outputs=("output_layer",))
    with MetricLog(args.out, rank=0) as log:
        for step in range(args.steps):
            model.zero_grad_buffer()
            optimizer.zero_grad()
            loss = gpt.loss_of(model, gpt.batch(step))
            loss.backward()
            model.finish_grad_sync()
            optimizer.step()
            scheduler.step(increment=1)
            log.log(step, loss=loss.detach())
    if capture is not None:
        capture.close()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

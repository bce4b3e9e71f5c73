"""Set-up of the training job: the model, its optimizer and its learning-rate schedule."""

import argparse

import model as model_lib
import norms
import torch

FEATURES, OUTPUTS = 12, 3


def prepare(
    args: argparse.Namespace,
) -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """Build the regressor, AdamW over its parameters and a linear warm-up, then apply the
    launch's precision options."""
    torch.manual_seed(args.seed)
    net = model_lib.Regressor(FEATURES, OUTPUTS)
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4))
    # precision options
    if args.fp32_norm:
        n = norms.convert_norms(net)
        print(f"fp32 layer norms: {n} replaced")
    return net, opt, sched

"""The fix the ground truth applies: the layer norms are converted before the optimizer is
built, so AdamW holds the Fp32LayerNorm parameters the forward reads (and not the replaced
modules' ones). Same model, same values, same optimizer settings; only the order moves."""

import model as model_lib
import norms
import torch
import trainer


def prepare(args):
    torch.manual_seed(args.seed)
    net = model_lib.Regressor(trainer.FEATURES, trainer.OUTPUTS)
    if args.fp32_norm:
        n = norms.convert_norms(net)
        print(f"fp32 layer norms: {n} replaced")
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4))
    return net, opt, sched

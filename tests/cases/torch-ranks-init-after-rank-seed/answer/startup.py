"""The fix the ground truth applies: every rank builds the model right after the shared
base seed, and only then seeds its own data stream with base seed + rank (and warms it when
asked). The ranks draw the same initial weights again, and the first batch prepared early is
the same batch a stream drawn on demand gives: nothing else draws in between."""

import torch
from startup import RankStream, build_model


def setup_training(args, rank):
    torch.manual_seed(args.seed)
    model = build_model()
    stream = RankStream(args.seed, rank)
    if args.warm_start_data:
        stream.warm()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    return model, opt, stream

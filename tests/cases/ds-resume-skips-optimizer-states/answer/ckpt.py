"""The fix the ground truth applies: restoring a checkpoint to continue training brings the
ZeRO optimizer partitions back too (the Adam moments and step counts), not the weights
alone."""

TAG = "last"


def restore(engine, ckpt_dir):
    _, client = engine.load_checkpoint(ckpt_dir, tag=TAG, load_optimizer_states=True)
    return int(client["step"])

"""The job's checkpoints, through DeepSpeed's own: save_checkpoint writes the module, the
ZeRO partitions and the client state (the global step the checkpoint was taken after);
restore brings a checkpoint back into a freshly initialised engine and says which step it
was taken after."""

TAG = "last"


def save(engine, ckpt_dir: str, step: int) -> None:
    engine.save_checkpoint(ckpt_dir, tag=TAG, client_state={"step": step})


def restore(engine, ckpt_dir: str) -> int:
    """Load the checkpoint in ckpt_dir into the engine; the step it was taken after."""
    # weights only: the fine-tuning jobs start from the same checkpoints through this
    # helper, and a pretraining run's Adam moments must not carry over into a fine-tune
    _, client = engine.load_checkpoint(ckpt_dir, tag=TAG, load_optimizer_states=False)
    return int(client["step"])

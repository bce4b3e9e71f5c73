"""The job's DeepSpeed config: everything fixed but how the global batch of 8 is split."""

TRAIN_BATCH = 8


def build_config(micro: int, gas: int) -> dict:
    return {
        "train_batch_size": TRAIN_BATCH,
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": gas,
        "gradient_clipping": 1.0,
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": 0.01, "weight_decay": 0.01, "torch_adam": True},
        },
        "zero_optimization": {"stage": 1},
        "steps_per_print": 1000000000,
    }

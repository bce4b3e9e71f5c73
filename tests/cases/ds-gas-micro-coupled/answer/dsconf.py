"""The ground truth's intervention: B's config built with A's split of the global batch
(micro-batch 4, 2 accumulation steps), whatever B's flags say. The two flags are coupled
by train_batch_size = 8, so neither can be given A's value alone."""


def build_config(micro, gas):
    return {
        "train_batch_size": 8,
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 2,
        "gradient_clipping": 1.0,
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": 0.01, "weight_decay": 0.01, "torch_adam": True},
        },
        "zero_optimization": {"stage": 1},
        "steps_per_print": 1000000000,
    }

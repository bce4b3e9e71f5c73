"""The fix the ground truth applies: the fine-tuning stage is applied before the engine is
built, so ZeRO's optimizer holds (and partitions, reduces and steps) the embedding too.
Same warm-up, same stages, same engine settings; only the order moves."""

import deepspeed
from finetune.setup import apply_stage, warm_up_head


def build_engine(model, config, calibration):
    warm_up_head(model, calibration)
    apply_stage(model, "finetune")
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    return engine

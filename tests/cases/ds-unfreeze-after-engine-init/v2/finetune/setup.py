"""Set-up of a fine-tuning job: the head is warmed up on a calibration batch with the
pretrained embedding frozen, so that its first gradients do not disturb the embedding; then
the whole model is trained by DeepSpeed.

Which submodules train is a named stage (STAGES), applied by apply_stage, so that a job can
add stages (a frozen encoder, a layer-wise unfreeze) without touching the set-up. The
fine-tuning stage is applied to the module the engine trains."""

import deepspeed
import torch
import torch.nn.functional as F

WARMUP_STEPS, WARMUP_LR = 4, 0.05
STAGES = {"warmup": {"embed": False}, "finetune": {"embed": True}}


def apply_stage(model: torch.nn.Module, stage: str) -> None:
    for name, trainable in STAGES[stage].items():
        for p in getattr(model, name).parameters():
            p.requires_grad_(trainable)


def warm_up_head(model: torch.nn.Module, calibration: tuple[torch.Tensor, torch.Tensor]) -> None:
    """A few plain SGD steps on the head alone; leaves the embedding frozen and no gradient."""
    apply_stage(model, "warmup")
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=WARMUP_LR)
    tokens, labels = calibration
    for _ in range(WARMUP_STEPS):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(tokens), labels).backward()
        opt.step()
    opt.zero_grad(set_to_none=True)


def build_engine(model: torch.nn.Module, config: dict, calibration) -> deepspeed.DeepSpeedEngine:
    warm_up_head(model, calibration)
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    apply_stage(engine.module, "finetune")
    return engine

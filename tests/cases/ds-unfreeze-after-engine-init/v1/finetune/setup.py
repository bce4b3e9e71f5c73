"""Set-up of a fine-tuning job: the head is warmed up on a calibration batch with the
pretrained embedding frozen, so that its first gradients do not disturb the embedding; then
the whole model is made trainable and handed to DeepSpeed."""

import deepspeed
import torch
import torch.nn.functional as F

WARMUP_STEPS, WARMUP_LR = 4, 0.05


def set_embedding_trainable(model: torch.nn.Module, trainable: bool) -> None:
    for p in model.embed.parameters():
        p.requires_grad_(trainable)


def warm_up_head(model: torch.nn.Module, calibration: tuple[torch.Tensor, torch.Tensor]) -> None:
    """A few plain SGD steps on the head alone; leaves the embedding frozen and no gradient."""
    set_embedding_trainable(model, False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=WARMUP_LR)
    tokens, labels = calibration
    for _ in range(WARMUP_STEPS):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(tokens), labels).backward()
        opt.step()
    opt.zero_grad(set_to_none=True)


def build_engine(model: torch.nn.Module, config: dict, calibration) -> deepspeed.DeepSpeedEngine:
    warm_up_head(model, calibration)
    set_embedding_trainable(model, True)
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    return engine

"""The model and data both runs share: a tiny megatron-core GPT (local layer spec, bf16
parameters) built on the CPU from one seed, so both runs start from the same bytes, and a
batch per step drawn from a generator seeded by the step.

Both runs set up torch.distributed (NCCL, world 1) and Megatron's parallel state (TP=1,
PP=1), because the model's layers read them.
"""

from __future__ import annotations

import os

import torch

VOCAB = 128
SEQ = 32
BATCH = 8
SEED = 1234


def init_parallel(port: int) -> None:
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    torch.cuda.set_device(0)
    torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(SEED)


def build_config():
    from megatron.core.transformer.transformer_config import TransformerConfig

    return TransformerConfig(
        num_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        use_cpu_initialization=True,
        bf16=True,
        params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        init_method_std=0.02,
    )


def build_model(config):
    """The GPT wrapped the way Megatron runs bf16 models: Float16Module casts float inputs
    to bf16 and the last stage's output back to fp32."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.module import Float16Module

    torch.manual_seed(SEED)
    gpt = GPTModel(
        config=config,
        transformer_layer_spec=get_gpt_layer_local_spec(),
        vocab_size=VOCAB,
        max_sequence_length=SEQ,
        position_embedding_type="learned_absolute",
    )
    return Float16Module(config, gpt).cuda()


def batch(step: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(10_000 + step)
    seq = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    causal = torch.tril(torch.ones(1, 1, SEQ, SEQ)) < 0.5
    return {
        "input_ids": seq[:, :-1].cuda(),
        "labels": seq[:, 1:].cuda(),
        "position_ids": torch.arange(SEQ).unsqueeze(0).expand(BATCH, SEQ).cuda(),
        "attention_mask": causal.cuda(),
    }


def loss_of(model, b: dict[str, torch.Tensor]) -> torch.Tensor:
    per_token = model(b["input_ids"], b["position_ids"], b["attention_mask"], labels=b["labels"])
    return per_token.float().mean()

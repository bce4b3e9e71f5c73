"""finetune: how our classification jobs fine-tune a pretrained model with DeepSpeed (a head
warm-up with the embedding frozen, then the whole model trained by the engine).

    from finetune import setup
    engine = setup.build_engine(model, ds_config, calibration=(tokens, labels))
"""

__version__ = "1.4.0"

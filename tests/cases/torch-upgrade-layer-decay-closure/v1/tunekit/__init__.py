"""tunekit: the helpers of our fine-tuning jobs (layer-wise decay, warm-up)."""

__version__ = "0.7.2"

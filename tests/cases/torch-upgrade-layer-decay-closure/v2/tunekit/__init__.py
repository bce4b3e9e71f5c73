"""tunekit: the helpers of our fine-tuning jobs (layer-wise decay, warm-up).

    from tunekit.layerwise import layer_scales
    from tunekit.schedule import linear_warmup

0.8: layer_scales() exposes the factor of each layer (for logging), and a floor,
min_scale, keeps the deepest layers of a tall stack from stopping altogether.
"""

__version__ = "0.8.0"

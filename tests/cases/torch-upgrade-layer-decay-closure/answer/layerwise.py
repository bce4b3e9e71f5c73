"""The fix the ground truth applies: tunekit 0.8's apply_layer_decay with each hook bound to
its own layer's factor (a default argument, evaluated when the hook is made). 0.8's one
nested hook reads ``scale`` from the enclosing function when it runs, at backward, after
the loop has left it at the last layer's factor; 0.7 bound it with functools.partial."""

from tunekit.layerwise import layer_scales


def apply_layer_decay(layers, decay, min_scale=0.0):
    handles = []
    for layer, scale in zip(layers, layer_scales(len(layers), decay, min_scale), strict=True):
        for param in layer.parameters():
            handles.append(param.register_hook(lambda grad, scale=scale: grad * scale))
    return handles

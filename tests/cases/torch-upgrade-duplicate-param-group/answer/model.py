"""The fix the ground truth applies: picolm 0.5's TinyLM.optim_groups, judging each parameter
with the module that owns it as 0.5 does, but listing each parameter once. The output head
shares its weight with the token embedding, so walking the modules meets that tensor twice
(under tok_embed and under head); the second meeting is skipped, and the groups are 0.4's:
the same members in the same order."""

import torch.nn as nn

NO_DECAY_MODULES = (nn.LayerNorm,)


def optim_groups(self, weight_decay):
    decay, no_decay, seen = [], [], set()
    for module in self.modules():
        for name, param in module.named_parameters(recurse=False):
            if id(param) in seen:
                continue
            seen.add(id(param))
            plain = isinstance(module, NO_DECAY_MODULES) or name in ("bias", "pos_embed")
            (no_decay if plain else decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]

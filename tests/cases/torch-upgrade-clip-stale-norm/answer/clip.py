"""The fix the ground truth applies: GradClipper.clip_ with the coefficient computed from
this call's gradients, as stepkit 0.6's clip_by_total_norm did (0.7 takes it from the norm
cached at the previous call), the cache still kept for last_norm."""

import torch
from stepkit.clip import total_norm


def clip_(self, grads):
    norm = total_norm(grads, self.norm_type)
    coef = torch.clamp(self.max_norm / (norm + self.eps), max=1.0)
    for g in grads:
        g.mul_(coef)
    self._norm = norm
    return norm

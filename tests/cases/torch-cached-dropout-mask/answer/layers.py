"""The fix the ground truth applies: a fresh mask is drawn at every call, flag or not, so
each step's dropout is an independent sample and the global generator is consumed exactly
as without the cache; nothing is kept between calls."""


def forward(self, x):
    if not self.training or self.p == 0.0:
        return x
    mask = self.draw(x)
    return x * mask

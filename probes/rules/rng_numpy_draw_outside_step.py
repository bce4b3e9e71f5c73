"""A draw from numpy's global generator in a helper outside the training step, while the
step draws from it too."""

from ._draws import NUMPY_DRAWS, probe

PROBE = probe(
    "numpy",
    NUMPY_DRAWS,
    title="numpy's global generator drawn outside the training step",
    rationale=(
        "A helper beside the training step (an audit, a metrics sample, a validation subset) "
        "draws from numpy's global generator (np.random), the stream the training's own "
        "shuffles, noise or augmentations come from: whenever the helper runs a different "
        "number of times, every later draw of the training moves. The draw is below torch's "
        "dispatcher, so an op trace shows only its effect (another batch). A generator of "
        "the helper's own (np.random.default_rng) leaves the shared stream alone."
    ),
)

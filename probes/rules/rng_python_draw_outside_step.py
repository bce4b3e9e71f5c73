"""A draw from python's global generator in a helper outside the training step, while the
step draws from it too."""

from ._draws import PYTHON_DRAWS, probe

PROBE = probe(
    "python",
    PYTHON_DRAWS,
    title="python's global generator drawn outside the training step",
    rationale=(
        "A helper beside the training step (a logging pick, a validation subset, a sampled "
        "metric) draws from python's global generator (the random module), the stream the "
        "training's own shuffles or choices come from: whenever the helper runs a different "
        "number of times, every later draw of the training moves. A generator of the "
        "helper's own (random.Random(seed)) leaves the shared stream alone."
    ),
)

"""A draw from torch's global generator in a helper outside the training step, while the
step draws from it too (dropout, a draw of its own)."""

from ._draws import DROPOUTS, TENSOR_SAMPLERS, TORCH_DRAWS, TORCH_SEEDS, probe

PROBE = probe(
    "torch",
    TORCH_DRAWS | DROPOUTS | TORCH_SEEDS | TENSOR_SAMPLERS,
    title="torch's global generator drawn outside the training step",
    rationale=(
        "A helper beside the training step (a validation subset, an augmentation, a metrics "
        "or logging sample) draws from torch's global generator, the stream the step's "
        "dropout or its own draws come from: whenever the helper runs a different number of "
        "times (a flag, an evaluation interval, a resume), every later draw of the step "
        "moves and the runs stop agreeing with no change to the model. A generator of the "
        "helper's own (torch.Generator, generator=) leaves the step's stream alone."
    ),
)

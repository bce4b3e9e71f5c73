"""A compiled model (torch.compile's OptimizedModule) names its parameters as the eager model
does in the state at step boundaries: otherwise a compiled run and an eager one pair none of
them."""

from __future__ import annotations

import torch

from triage_agent.boundary_capture import state_now


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(400, 300), torch.nn.Tanh(), torch.nn.Linear(300, 2))


def test_the_state_at_a_boundary_names_a_compiled_models_parameters_as_the_eager_ones():
    compiled = torch.compile(_model(), backend="eager")
    paths = set(state_now().tensors)
    assert {"model.0.weight", "model.2.bias"} <= paths, sorted(paths)[:8]
    assert not any("_orig_mod" in p for p in paths)
    del compiled

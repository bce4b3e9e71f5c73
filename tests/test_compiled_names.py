"""A compiled model (torch.compile's OptimizedModule) names its parameters as the eager model
does, in the state at step boundaries and in the tracer's optimizer events: otherwise a
compiled run and an eager one pair none of them."""

from __future__ import annotations

import torch

from triage_agent.boundary_capture import state_now
from triage_agent.fingerprint.attribution import ScopeIndex


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(400, 300), torch.nn.Tanh(), torch.nn.Linear(300, 2))


def test_the_state_at_a_boundary_names_a_compiled_models_parameters_as_the_eager_ones():
    compiled = torch.compile(_model(), backend="eager")
    paths = set(state_now().tensors)
    assert {"model.0.weight", "model.2.bias"} <= paths, sorted(paths)[:8]
    assert not any("_orig_mod" in p for p in paths)
    del compiled


def test_the_tracer_names_a_compiled_models_parameters_as_the_eager_ones():
    names = []
    for model in (_model(), torch.compile(_model(), backend="eager")):
        index = ScopeIndex()
        assert index.name_of(model, None) == ""
        names.append(sorted(index.param_names.values()))
    assert names[0] == names[1] == ["0.bias", "0.weight", "2.bias", "2.weight"]

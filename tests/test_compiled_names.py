"""A compiled model (torch.compile's OptimizedModule) names its layers and parameters as the
eager model does, in the tracer's scopes and in the state at step boundaries: otherwise a
compiled run and an eager one pair none of their parameters."""

from __future__ import annotations

import torch

from triage_agent.boundary_capture import state_now
from triage_agent.fingerprint.attribution import ScopeIndex, unwrap


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(400, 300), torch.nn.Tanh(), torch.nn.Linear(300, 2))


def test_the_tracer_names_a_compiled_model_as_the_eager_one():
    eager = _model()
    compiled = torch.compile(_model(), backend="eager")  # the wrapper, no code generated
    assert type(compiled).__name__ == "OptimizedModule"
    assert unwrap(compiled) is compiled._orig_mod
    names = {}
    for model in (eager, compiled):
        index = ScopeIndex()
        assert index.name_of(model, None) == ""
        names[model] = sorted(index.param_names.values())
        assert index.name_of(unwrap(model)[2], "") == "2"
    assert names[eager] == names[compiled] == ["0.bias", "0.weight", "2.bias", "2.weight"]


def test_the_state_at_a_boundary_names_a_compiled_models_parameters_as_the_eager_ones():
    compiled = torch.compile(_model(), backend="eager")
    paths = set(state_now().tensors)
    assert {"model.0.weight", "model.2.bias"} <= paths, sorted(paths)[:8]
    assert not any("_orig_mod" in p for p in paths)
    del compiled

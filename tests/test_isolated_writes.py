"""isolate-writes gives back what a call leaves changed in what it is handed, modules' modes
included, and says which line inside the call set a mode it had to give back."""

from __future__ import annotations

import torch

from triage_agent.policies import WROTE_AT, _isolated_writes


def evaluate(model: torch.nn.Module) -> float:
    model.eval()
    with torch.no_grad():
        out = model(torch.ones(4, 3)).sum().item()
    model.train()
    return out


def look(model: torch.nn.Module) -> float:
    with torch.no_grad():
        return model(torch.ones(4, 3)).sum().item()


TRAIN_LINE = evaluate.__code__.co_firstlineno + 4


def _model() -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    model.train()
    model[1].eval()  # frozen statistics, as fine-tuning keeps them
    return model


def test_a_mode_a_call_leaves_changed_is_given_back_and_named_where_it_was_set():
    model, said = _model(), []
    isolated = _isolated_writes(evaluate, said.append)
    isolated(model)
    assert model[0].training and not model[1].training
    assert said == [f"{WROTE_AT}{__file__}:{TRAIN_LINE}"]
    isolated(model)  # said once: a call made every step does not say it again
    assert len(said) == 1


def test_a_call_that_leaves_every_mode_as_it_found_it_names_nothing():
    model, said = _model(), []
    _isolated_writes(look, said.append)(model)
    assert said == [] and model[0].training and not model[1].training
    assert torch.nn.Module.train.__qualname__ == "Module.train"  # the wrapper is gone

"""A seed's value and where it was set, observed and proven, on a job that is not a corpus case.

A run against its repeat (the same command): the job seeds its own ``torch.Generator`` from
the clock, so every launch draws other noise. The state capture records the seeding, with
its value and the job's line, in both runs; the loop pins that line to one value in both
runs, every step matches, and the verdict is a bug at the line that seeds.
"""

from __future__ import annotations

import pytest
from test_workflow_support import script_case, triage

from triage_agent.errors import InputError
from triage_agent.interventions import describe, parse_intervention, to_text
from triage_agent.ledger_view import verdict_basis
from triage_agent.records import EvidenceResult

NOISE = '''"""Input noise from a generator of the helper's own."""

import time

import torch


def noise_stream(seed):
    gen = torch.Generator()
    gen.manual_seed(seed + time.time_ns() % 100_000)
    return gen
'''

NOISE_TRAIN = """import sys
import torch
from noise import noise_stream
from triage_agent.metrics import MetricLog

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(32, 8)
gen = noise_stream(7)
with MetricLog(sys.argv[1], rank=0) as log:
    for step in range(4):
        loss = (model(x + 0.1 * torch.randn(x.shape, generator=gen))).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
"""


def test_pin_seed_reads_back_and_refuses_what_it_cannot_pin():
    iv = parse_intervention("pin-seed noise.py:10=17,26")
    assert to_text(iv) == "pin-seed noise.py:10=17,26"
    assert "noise.py:10" in describe(iv) and "17, 26" in describe(iv)
    for bad in ("pin-seed noise.py=1", "pin-seed noise.py:10=", "pin-seed noise.py:10=abc"):
        with pytest.raises(InputError, match="pin-seed FILE:LINE"):
            parse_intervention(bad)


def test_a_seed_from_the_clock_is_named_at_its_line_and_proven_by_pinning_it(tmp_path):
    # the same command twice: no declared difference, only the seed each launch makes
    case = script_case(tmp_path, "clock-seed", "", {"train.py": NOISE_TRAIN, "noise.py": NOISE})
    case = case.model_copy(
        update={"run_b": case.run_b.model_copy(update={"launch": case.run_a.launch})}
    )
    result, st = triage(case)
    assert result.mismatch.step == 0
    manifests = [e for e in st.evidence if e.kind == "manifest"]
    assert any(
        "torch.Generator.manual_seed" in e.summary and "noise.py:10" in e.summary for e in manifests
    )
    v = result.verdict
    assert v is not None and v.classification.value == "bug", v
    assert "noise.py:10" in (v.location or ""), v.location
    basis = verdict_basis(st)
    assert basis is not None and basis.kind == "intervention"
    proof = next(e for e in st.evidence if e.id == basis.evidence)
    assert proof.result == EvidenceResult.supported and proof.data.applied_to == "both"
    assert proof.data.interventions[0].startswith("pin-seed noise.py:10=")

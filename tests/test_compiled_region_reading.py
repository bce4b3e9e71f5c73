"""A proven setting that compiles a module (torch.compile) in one run, read from op traces
built here: the ops the eager run executes inside the compiled module are ones the compiled
run ran inside its kernels, not ones it skipped, so the reading names the compiled region and
the setting (a policy, the same arithmetic rounded otherwise) even where a selection op
(an embedding) lies among them; an op outside every compiled region that one run lacks is
still structural, and the reading stays unknown."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import torch
from test_ledger_support import add_evidence, supported_hypothesis

from triage_agent.evidence_data import TraceCompareData
from triage_agent.ledger import Ledger
from triage_agent.metrics import MetricLog, diff_metrics, load_metrics
from triage_agent.records import EvidenceKind, EvidenceResult
from triage_agent.trace_format import TRACE_SCHEMA_VERSION
from triage_agent.workflow.characterize import MismatchReport
from triage_agent.workflow.setting_effect import read_proven_setting, read_traces

# (kind, phase, scope, name, input digests, output digests, meta); "x" and "y" digests are
# the two runs' own values where they differ, a fixed value where both runs hold the same
EAGER = [
    ("op", "forward", "embed", "aten::embedding", ["tok", "w0"], ["h0"], {}),
    ("module", "forward", "embed", "Embedding", ["tok", "w0"], ["h0"], {}),
    ("op", "forward", "block.norm", "aten::native_layer_norm", ["h0"], ["h1x"], {}),
    ("module", "forward", "block.norm", "LayerNorm", ["h0"], ["h1x"], {}),
    ("op", "forward", "out", "aten::addmm", ["h1x"], ["zx"], {}),
    ("module", "forward", "out", "Linear", ["h1x"], ["zx"], {}),
    ("module", "forward", "", "LM", ["tok"], ["zx"], {}),
    ("op", "other", "", "aten::_log_softmax", ["zx"], ["lx"], {}),
    ("op", "backward", "", "aten::_log_softmax_backward_data", ["lx"], ["gx"], {}),
    ("module", "backward", "", "LM", [], ["gx"], {"grad_of_output": 0}),
    ("op", "backward", "", "aten::mm", ["gx"], ["g1x"], {}),
    ("op", "backward", "block.norm", "aten::native_layer_norm_backward", ["g1x"], ["g2x"], {}),
    ("op", "backward", "embed", "aten::embedding_dense_backward", ["g2x"], ["gwx"], {}),
    ("op", "optimizer", "", "aten::_foreach_lerp_.Scalar", ["gwx"], ["m1x"], {}),
]
COMPILED = [
    ("op", "forward", "_orig_mod", "aten::addmm.out", ["k0"], ["zy"], {}),
    ("module", "forward", "_orig_mod", "LM", ["tok"], ["zy"], {}),
    ("module", "forward", "", "OptimizedModule", ["tok"], ["zy"], {"compiled": "LM"}),
    ("op", "other", "", "aten::_log_softmax", ["zy"], ["ly"], {}),
    ("op", "backward", "", "aten::_log_softmax_backward_data", ["ly"], ["gy"], {}),
    ("module", "backward", "_orig_mod", "LM", [], ["gy"], {"grad_of_output": 0}),
    ("module", "backward", "", "OptimizedModule", [], ["gy"], {"grad_of_output": 0}),
    ("op", "backward", "", "aten::mm.out", ["gy"], ["g1y"], {}),
    ("op", "backward", "", "aten::mm.out", ["g1y"], ["gwy"], {}),
    ("op", "optimizer", "", "aten::_foreach_lerp_.Scalar", ["gwy"], ["m1y"], {}),
]


def _digest(name: str) -> dict:
    return {"shape": [4], "dtype": "float32", "numel": 4, "digest": f"{abs(hash(name)):016x}"}


def _trace(path: Path, events: list[tuple]) -> str:
    path.mkdir(parents=True)
    header = {
        "type": "header",
        "schema_version": TRACE_SCHEMA_VERSION,
        "run_id": path.name,
        "rank": 0,
        "world_size": 1,
        "coords": {"rank": 0},
        "versions": {},
        "config": {"level": "op"},
        "created": "2026-01-01T00:00:00+00:00",
        "host": "here",
        "argv": [],
    }
    lines = [json.dumps(header)]
    calls: dict[tuple[str, str], int] = {}
    for seq, (kind, phase, scope, name, ins, outs, meta) in enumerate(events):
        call = calls[(scope, name)] = calls.get((scope, name), -1) + 1
        ev = {"type": "event", "seq": seq, "step": 0, "kind": kind, "name": name}
        ev |= {"scope": scope, "call": call, "phase": phase, "caller": None, "dump": None}
        ev |= {"inputs": [_digest(i) for i in ins], "outputs": [_digest(o) for o in outs]}
        lines.append(json.dumps(ev | {"meta": meta}))
    lines.append(json.dumps({"type": "step_end", "step": 0, "events": len(events)}))
    lines.append(json.dumps({"type": "end", "status": "ok", "steps": [0], "note": ""}))
    (path / "trace_rank00000.jsonl").write_text("\n".join(lines) + "\n")
    return str(path)


def _loss(bits: int) -> torch.Tensor:
    return torch.tensor(struct.unpack("<f", struct.pack("<I", bits))[0])


def _report(tmp_path: Path) -> MismatchReport:
    """Run B's loss one ulp from run A's: the same quantity rounded otherwise."""
    for run, bits in (("a", 0x408F756B), ("b", 0x408F756C)):
        with MetricLog(tmp_path / f"metrics_{run}", rank=0) as log:
            log.log(0, loss=_loss(bits))
    diff = diff_metrics(load_metrics(tmp_path / "metrics_a"), load_metrics(tmp_path / "metrics_b"))
    return MismatchReport(given_step=None, step=0, message="", diff=diff)


def _read(tmp_path: Path, eager: list[tuple], compiled: list[tuple]):
    dirs = {"a": _trace(tmp_path / "a", eager), "b": _trace(tmp_path / "b", compiled)}
    ledger = Ledger(tmp_path / "ws")
    hyp = supported_hypothesis(
        ledger,
        "the runs differ in launch flag --jit",
        "config",
        EvidenceKind.rerun,
        "all steps match",
    )
    trace_ev = add_evidence(
        ledger,
        None,
        EvidenceResult.observed,
        EvidenceKind.trace_compare,
        "whole-step op trace",
        data=TraceCompareData(level="op", trace_dirs=dirs),
    )
    read = read_proven_setting(
        None, ledger, _report(tmp_path), hyp, "config:--jit", trace_ev, timeout_s=60, deadline=0
    )
    return read, read_traces(dirs["a"], dirs["b"], 0), ledger


def test_ops_inside_a_region_one_run_compiles_are_the_region_not_missing_ops(tmp_path):
    read, first, _ = _read(tmp_path, EAGER, COMPILED)
    assert first is not None and first.role == "compiled"
    assert (first.step, first.scope, first.name, first.parted) == (0, "", "LM", [])
    (region,) = first.regions
    assert region.compiled_in == "b" and region.inputs_equal and region.outputs_equal is False
    assert "aten::embedding" in region.ops_a and "aten::embedding_dense_backward" in region.ops_a
    assert region.ops_b == ["aten::addmm.out", "aten::mm.out", "aten::mm.out"]
    assert read is not None and read.classification.value == "policy-difference"
    assert read.location == "config:--jit"  # the setting, not an op inside the region
    assert "<root> (LM) compiled in run b" in read.statement
    assert "(aten::embedding) copy values and cannot change bits" in read.statement


def test_an_op_outside_every_compiled_region_that_one_run_lacks_stays_structural(tmp_path):
    # A gathers the loss's targets outside the model; B does not: no region covers it
    extra = ("op", "other", "", "aten::gather", ["lx"], ["tx"], {})
    eager = [*EAGER[:8], extra, *EAGER[8:]]
    read, first, ledger = _read(tmp_path, eager, COMPILED)
    assert first is not None and first.role == "compiled" and first.parted == ["aten::gather"]
    assert read is None
    notes = [n["text"] for n in ledger.state().notes]
    assert any("non-arithmetic ops ['aten::gather']" in n for n in notes), notes


def test_a_region_compiled_in_neither_run_is_read_op_by_op(tmp_path):
    # without the mark, the eager run's ops there are structural, as before: the embedding
    # (a selection op) leaves the setting's effect unknown rather than guessed
    unmarked = [(k, p, s, n, i, o, {}) for k, p, s, n, i, o, _ in COMPILED]
    read, first, _ = _read(tmp_path, EAGER, unmarked)
    assert first is not None and first.role == "structural" and not first.regions
    assert "aten::embedding" in first.parted
    assert read is None

import json

import pytest
import torch
import torch.distributed as dist

from triage_agent.fingerprint import CaptureConfig, Tracer
from triage_agent.fingerprint import digest as dg
from triage_agent.trace_format import StepEnd, TraceEnd, TraceEvent, TraceHeader


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _train(tr, steps, model, opt, seed=1):
    g = torch.Generator().manual_seed(seed)
    for s in range(steps):
        tr.step(s)
        model(torch.randn(3, 4, generator=g)).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()


def _read(path):
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    kinds = {"header": TraceHeader, "event": TraceEvent, "step_end": StepEnd, "end": TraceEnd}
    return [kinds[x["type"]].model_validate(x) for x in lines]


@pytest.mark.parametrize("level", ["module", "op"])
def test_capture_trace_is_valid_and_repeatable(tmp_path, level):
    runs = []
    for name in ("a", "b"):
        m = _model()
        cfg = CaptureConfig(out_dir=tmp_path / name, steps=(1, 2), level=level)
        with Tracer(cfg) as tr:
            _train(tr, 4, m, torch.optim.SGD(m.parameters(), lr=0.1))
        recs = _read(tmp_path / name / "trace_rank00000.jsonl")
        assert isinstance(recs[0], TraceHeader) and isinstance(recs[-1], TraceEnd)
        assert recs[-1].steps == [1, 2]
        evs = [r for r in recs if isinstance(r, TraceEvent)]
        assert {e.step for e in evs} == {1, 2}
        assert {"forward", "backward"} <= {e.phase for e in evs}
        assert any(e.kind == "optimizer" and e.name == "0.weight" for e in evs)
        if level == "op":
            assert any(e.name == "aten::addmm" and e.scope == "0" for e in evs)
        runs.append([(e.step, e.scope, e.name, e.call, e.inputs, e.outputs) for e in evs])
    assert runs[0] == runs[1]


def test_capture_detects_a_changed_weight_bit(tmp_path):
    outs = []
    for name, flip in (("a", False), ("b", True)):
        m = _model()
        if flip:
            with torch.no_grad():
                w = m[2].weight.view(torch.int32)
                w[0, 0] ^= 1 << 16  # a mantissa bit that survives rounding
        cfg = CaptureConfig(out_dir=tmp_path / name, steps=(0, 0), level="module")
        with Tracer(cfg) as tr:
            _train(tr, 1, m, torch.optim.SGD(m.parameters(), lr=0.1))
        evs = [
            r for r in _read(tmp_path / name / "trace_rank00000.jsonl") if isinstance(r, TraceEvent)
        ]
        outs.append({(e.scope, e.name, e.phase, e.call): e for e in evs})
    a, b = outs
    fwd = ("0", "Linear", "forward", 0)
    assert a[fwd].outputs == b[fwd].outputs  # before the flipped layer
    last = ("2", "Linear", "forward", 0)
    # the activation coming in is equal; the layer's own weight, recorded as an input after
    # it, is not: the layer is a receiver of changed state, never an origin on equal inputs
    assert a[last].inputs[0] == b[last].inputs[0]
    assert [i.shape for i in a[last].inputs[1:]] == [[2, 8], [2]]  # weight, bias
    assert a[last].inputs[1] != b[last].inputs[1] and a[last].inputs[2] == b[last].inputs[2]
    assert a[last].outputs != b[last].outputs


def test_capture_no_sync_or_collective_inside_a_traced_step(tmp_path, monkeypatch):
    counts = {"sync": 0, "readback": 0}
    for name in ("item", "tolist", "cpu", "numpy"):
        orig = getattr(torch.Tensor, name)

        def counted(self, *a, _orig=orig, **k):
            counts["sync"] += 1
            return _orig(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, counted)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: counts.__setitem__("sync", 99))
    for name in ("all_reduce", "broadcast", "barrier", "all_gather_into_tensor"):
        monkeypatch.setattr(dist, name, lambda *a, **k: counts.__setitem__("sync", 99))
    orig_readback = dg.readback

    def rb(staged):
        counts["readback"] += 1
        return orig_readback(staged)

    monkeypatch.setattr("triage_agent.fingerprint.sink.readback", rb)
    m = _model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    cfg = CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="op")
    with Tracer(cfg) as tr:
        tr.step(0)
        m(torch.randn(3, 4)).pow(2).sum().backward()
        opt.step()
        assert counts == {"sync": 0, "readback": 0}
        assert tr.digests_staged > 10
        tr.end_step()
        assert counts["readback"] == 1


def test_capture_tensor_is_hashed_once_per_event_and_again_at_the_next(tmp_path):
    x = torch.randn(64, 64)
    cfg = CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="op")
    with Tracer(cfg) as tr:
        tr.step(0)
        torch.mm(x, x)
        n1 = tr.digests_staged
        torch.add(x, 1.0)
        n2 = tr.digests_staged
        x.add_(1.0)
        torch.neg(x)
        n3 = tr.digests_staged
    assert n1 == 2  # x once (used twice in one call), the product once
    # a digest from an earlier event is never reused: a write the version counter does
    # not show may have happened in between (tests/test_capture_digests.py)
    assert n2 - n1 == 2
    assert n3 - n2 == 4


def test_capture_inplace_output_is_not_the_stale_input_digest(tmp_path):
    cfg = CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="op")
    x = torch.randn(16, 16)
    with Tracer(cfg) as tr:
        tr.step(0)
        x.mul_(3.0)
        tr.end_step()
    ev = next(
        r
        for r in _read(tmp_path / "trace_rank00000.jsonl")
        if isinstance(r, TraceEvent) and r.name.startswith("aten::mul_")
    )
    assert ev.inputs[0].digest != ev.outputs[0].digest


def test_capture_uninitialised_memory_and_rng_state_are_recorded(tmp_path):
    cfg = CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="op")
    with Tracer(cfg) as tr:
        tr.step(0)
        torch.nn.functional.dropout(torch.randn(8, 8), 0.5, training=True)
        tr.end_step()
    evs = {
        r.name: r for r in _read(tmp_path / "trace_rank00000.jsonl") if isinstance(r, TraceEvent)
    }
    assert evs["aten::empty_like"].outputs[0].digest == "uninitialized"
    bern = evs["aten::bernoulli_.float"]
    assert bern.inputs[0].digest == "uninitialized"  # overwritten memory is not an input
    assert len(bern.meta["rng"]) == 16  # the generator state it drew from


def test_capture_async_collective_hashed_at_wait(tmp_path):
    if not dist.is_available():
        pytest.skip("torch built without distributed")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        cfg = CaptureConfig(out_dir=tmp_path / "t", steps=(0, 0), level="collective", digest="both")
        t = torch.ones(4)
        with Tracer(cfg) as tr:
            tr.step(0)
            h = dist.all_reduce(t, async_op=True)
            t.mul_(3)  # changes the destination after launch: the wait-time digest shows it
            h.wait()
            dist.all_reduce(torch.ones(2))
        evs = [
            r for r in _read(tmp_path / "t" / "trace_rank00000.jsonl") if isinstance(r, TraceEvent)
        ]
    finally:
        dist.destroy_process_group()
    first, second = evs
    assert first.name == "all_reduce" and first.meta["completed"] == "wait"
    assert first.inputs[0].order != first.outputs[0].order
    assert first.caller and first.caller.endswith(".py:" + first.caller.rsplit(":", 1)[1])
    assert "test_capture.py" in first.caller
    assert second.call == 1 and second.meta["completed"] == "return"


def test_capture_steps_outside_window_install_nothing(tmp_path):
    cfg = CaptureConfig(out_dir=tmp_path, steps=(5, 6), level="op")
    with Tracer(cfg) as tr:
        tr.step(0)
        assert not torch.nn.modules.module._global_forward_hooks
        assert tr._mode is None
        torch.mm(torch.randn(2, 2), torch.randn(2, 2))
        assert tr.digests_staged == 0
    status = json.loads((tmp_path / "capture_rank00000.json").read_text())
    assert status["steps_seen"] == [0] and status["steps_traced"] == []
    assert not (tmp_path / "trace_rank00000.jsonl").exists()


def test_capture_trace_lines_are_what_the_schema_writes(tmp_path):
    # lines are built without the model on the hot path; they must be byte for byte what
    # TraceEvent.model_dump_json(exclude_none=True) writes for the same event
    m = _model()
    cfg = CaptureConfig(out_dir=tmp_path, steps=(0, 1), level="op", digest="xor")
    with Tracer(cfg) as tr:
        _train(tr, 1, m, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9))
        tr.step(1)
        torch.nn.functional.dropout(torch.randn(4, 4), 0.5, training=True).topk(2)
    lines = [x for x in (tmp_path / "trace_rank00000.jsonl").read_text().splitlines()]
    events = [x for x in lines if json.loads(x)["type"] == "event"]
    assert len(events) > 20
    for line in events:
        assert TraceEvent.model_validate_json(line).model_dump_json(exclude_none=True) == line
    recs = [TraceEvent.model_validate_json(x) for x in events]
    assert any(e.caller for e in recs) and any(e.meta.get("rng") for e in recs)
    assert any(d is not None and d.order for e in recs for d in e.outputs)


def test_capture_tensor_walk_matches_pytree():
    from torch.utils._pytree import tree_leaves

    from triage_agent.fingerprint.capture import _op_tensors, _tensors

    a, b, c = torch.ones(1), torch.ones(2), torch.ones(3)
    for obj in (
        a,
        (a, b),
        [a, None, 3, b],
        (a, [b, c]),
        {"x": a, "y": (b, c)},
        torch.return_types.topk((a, b)),
        (a, torch.Size([2])),
        "text",
    ):
        want = [t for t in tree_leaves(obj) if isinstance(t, torch.Tensor)]
        got = _tensors(obj)
        assert [id(t) for t in got] == [id(t) for t in want]
    args, kwargs = (a, [b, None, c], 2.0), {"out": c, "weight": b}
    want = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    assert [id(t) for t in _op_tensors(args, kwargs)] == [id(t) for t in want]


def test_capture_optimizer_event_has_pre_step_inputs(tmp_path):
    m = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    cfg = CaptureConfig(out_dir=tmp_path, steps=(0, 0), level="collective")
    with Tracer(cfg) as tr:
        tr.step(0)
        m(torch.randn(3, 4)).sum().backward()
        opt.step()
        tr.end_step()
    evs = [
        r
        for r in _read(tmp_path / "trace_rank00000.jsonl")
        if isinstance(r, TraceEvent) and r.kind == "optimizer"
    ]
    assert evs
    for ev in evs:
        assert ev.meta["inputs"][:2] == ["param", "grad"]
        assert ev.inputs[1] == ev.outputs[1]  # the gradient is read, not written
        assert ev.inputs[0] != ev.outputs[0]  # the parameter moved


@pytest.mark.parametrize("change", ["data", "weight"])
def test_module_trace_never_names_an_origin_the_evidence_does_not_show(tmp_path, change):
    """Different input data, or a weight changed before the step: every module receives it.

    Backward module events record no inputs, and a module's weights are its inputs too, so
    neither may be reported as an origin with "equal inputs".
    """
    from triage_agent.compare import compare_runs, load_run

    for name in ("a", "b"):
        m = _model()
        if name == "b" and change == "weight":
            with torch.no_grad():
                m[0].weight.view(torch.int32)[0, 0] ^= 1 << 16
        cfg = CaptureConfig(out_dir=tmp_path / name, steps=(0, 0), level="module")
        with Tracer(cfg) as tr:
            seed = 2 if (name == "b" and change == "data") else 1
            _train(tr, 1, m, torch.optim.SGD(m.parameters(), lr=0.1), seed=seed)
    res = compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b"))
    r = res.ranks[0]
    assert r.status == "diverged" and r.origin is None
    first = r.first_divergence
    assert first.role == "receiver" and first.a.scope == "0" and first.a.phase == "forward"
    assert r.outside_scope is not None  # it says what to widen instead

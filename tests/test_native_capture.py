"""The C++ tracer: the Python path's digests and records, never a stale or racing digest.

The host-only build is exercised here (it observes ops and digests CPU tensors the same
way the CUDA build does); the tests marked gpu run the CUDA build, the side stream and the
races it must not lose.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from triage_agent.fingerprint import CaptureConfig, Tracer, digest_now
from triage_agent.fingerprint.native import NativeTracer, load, make_tracer, unavailable_reason
from triage_agent.trace_format import TraceEvent

NATIVE = load()
pytestmark = pytest.mark.skipif(
    NATIVE is None, reason=f"the native tracer cannot be built here: {unavailable_reason()}"
)
FLAGS = {"xor": 1, "order": 2, "both": 3}
DTYPES = [
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.float64,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]


def native_digest(t: torch.Tensor, mode: str) -> dict[str, str] | int:
    """The extension's digest of one tensor, as the record's digest/order fields."""
    st = NATIVE.State(side_stream=False, cache=True, base_mode=FLAGS[mode], order_names=[])
    st.begin_step()
    (code,) = st.stage([t], FLAGS[mode], False)
    digest, order, _ = st.flush(0, lambda b: "")
    if code < 0:
        return code
    rec = {"digest": f"{digest[code] & (2**64 - 1):016x}"}
    if order[code] is not None:
        rec["order"] = f"{order[code]:016x}"
    return rec


def layouts(dt: torch.dtype, device: str = "cpu") -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    base = torch.randn(7, 13, 5, generator=g) * 100
    base = base > 0 if dt == torch.bool else base.to(dt)
    base = base.to(device)
    return {
        "contiguous": base,
        "transposed": base.transpose(0, 2),
        "gapped slice": base[:, 3:9, 1:4],
        "expanded": base[:, :1].expand(7, 4, 5),
        "offset": base.reshape(-1)[3:],
        "odd length": base.reshape(-1)[1:6],
        "scalar": base.reshape(-1)[4].clone(),
    }


def python_fields(t: torch.Tensor, mode: str) -> dict[str, str]:
    rec = digest_now(t, mode)
    return {k: rec[k] for k in ("digest", "order") if k in rec}


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_native_digest_equals_python_digest_on_cpu(dt):
    for name, t in layouts(dt).items():
        for mode in FLAGS:
            assert native_digest(t, mode) == python_fields(t, mode), (name, mode)


def test_native_digest_of_a_conjugated_view_is_of_its_values():
    z = torch.randn(5, dtype=torch.complex64)  # odd: flipped sign bits do not cancel in xor
    assert native_digest(z.conj(), "both") == python_fields(z.conj(), "both")
    assert native_digest(z.conj(), "xor") != native_digest(z, "xor")


def test_native_digest_of_empty_and_meta_tensors_says_so():
    assert native_digest(torch.empty(0, 3), "xor") == -3
    assert native_digest(torch.empty(3, device="meta"), "xor") == -1


def _transformer(grad: bool):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    x = torch.randn(2, 8, 32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        model(x).float().square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def _mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16), torch.nn.LayerNorm(16)
    )
    x = torch.randn(4, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step():
        model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def _trace_lines(tmp_path: Path, make, step, level: str, scope: str | None = None) -> list[str]:
    out = tmp_path / make.__name__
    with make(CaptureConfig(out_dir=out, level=level, scope=scope)) as tr:
        for i in range(3):
            tr.step(i)
            step()
    lines = (out / "trace_rank00000.jsonl").read_text().splitlines()
    return [ln for ln in lines if '"type":"event"' in ln or '"type":"step_end"' in ln]


def test_native_module_trace_is_the_python_trace(tmp_path):
    """Module level, forward, backward and AdamW: byte-identical trace lines."""
    a = _trace_lines(tmp_path, Tracer, _transformer(True), "module")
    b = _trace_lines(tmp_path, NativeTracer, _transformer(True), "module")
    assert any('"kind":"optimizer"' in ln for ln in a)
    assert a == b


@pytest.mark.parametrize("scope", [None, "^(0|2)$"])
def test_native_op_trace_is_the_python_trace(tmp_path, scope):
    """Op level (C++ RecordFunction observer vs TorchDispatchMode): byte-identical lines."""
    a = _trace_lines(tmp_path, Tracer, _mlp(), "op", scope)
    b = _trace_lines(tmp_path, NativeTracer, _mlp(), "op", scope)
    ops = [ln for ln in b if '"kind":"op"' in ln]
    assert len(ops) > 30 and any('"phase":"backward"' in ln for ln in ops)
    assert a == b


def _events(out: Path) -> list[TraceEvent]:
    lines = (out / "trace_rank00000.jsonl").read_text().splitlines()
    return [TraceEvent.model_validate_json(ln) for ln in lines if '"type":"event"' in ln]


@pytest.mark.parametrize("cache", [False, True])
def test_native_op_digest_is_fresh_after_a_write_the_version_counter_misses(tmp_path, cache):
    """`.data` writes share the bytes but not the version counter: the digest must see them."""
    x = torch.randn(256)
    with NativeTracer(CaptureConfig(out_dir=tmp_path, level="op"), cache=cache) as tr:
        tr.step(0)
        y = x * 2
        before = digest_now(y, "xor")["digest"]
        version = y._version
        y.data.add_(1)
        assert y._version == version  # the case at hand: nothing bumped y's counter
        after = digest_now(y, "xor")["digest"]
        y + 0
        tr.end_step()
    add = [e for e in _events(tmp_path) if e.name == "aten::add.Tensor"][-1]
    assert before != after
    assert add.inputs[0].digest == after


@pytest.mark.parametrize("cache", [False, True])
def test_native_module_digest_is_fresh_after_a_write_the_version_counter_misses(tmp_path, cache):
    first, second = torch.nn.Identity(), torch.nn.Identity()
    x = torch.randn(256)
    with NativeTracer(CaptureConfig(out_dir=tmp_path, level="module"), cache=cache) as tr:
        tr.step(0)
        y = first(x)
        y.data.mul_(3)
        after = digest_now(y, "xor")["digest"]
        second(y)
        tr.end_step()
    ev = _events(tmp_path)
    assert ev[0].outputs[0].digest != after
    assert ev[1].inputs[0].digest == after


def test_native_digest_is_fresh_after_a_write_through_numpy(tmp_path):
    """No op is seen writing through a numpy view: by default nothing is reused across events."""
    x = torch.randn(256)
    with NativeTracer(CaptureConfig(out_dir=tmp_path, level="op")) as tr:
        tr.step(0)
        y = x * 2
        y.numpy()[:] = 7.0
        after = digest_now(y, "xor")["digest"]
        y + 0
        tr.end_step()
    add = [e for e in _events(tmp_path) if e.name == "aten::add.Tensor"][-1]
    assert add.inputs[0].digest == after


def test_native_reuses_a_digest_of_unchanged_bytes_when_asked(tmp_path):
    """With cross-event reuse on, an unchanged input of the next op is not hashed again."""
    x = torch.randn(256)
    with NativeTracer(CaptureConfig(out_dir=tmp_path, level="op"), cache=True) as tr:
        tr.step(0)
        y = x * 2
        for _ in range(5):
            y + 1
        staged = tr.digests_staged
        tr.end_step()
    # x, y, and five distinct outputs; y as an input five times is a reuse
    assert staged == 7


def test_make_tracer_falls_back_to_python_for_op_dumps(tmp_path):
    cfg = CaptureConfig(out_dir=tmp_path, level="op", dump=["aten::mm"])
    assert type(make_tracer(cfg)) is Tracer
    assert type(make_tracer(CaptureConfig(out_dir=tmp_path, level="op"))) is NativeTracer


# -- CUDA ---------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_native_digest_equals_python_digest_on_gpu(dt):
    for name, t in layouts(dt, "cuda").items():
        for mode in FLAGS:
            assert native_digest(t, mode) == python_fields(t, mode), (name, mode)


@pytest.mark.gpu
def test_native_digest_equals_python_digest_on_gpu_large_and_misaligned():
    big = torch.randn(3 << 20, device="cuda").to(torch.bfloat16)  # many chunks, one launch
    for t in (big, big[1:], big.view(torch.uint8)[3:], big.view(-1, 1024)[:, 5:700]):
        for mode in FLAGS:
            assert native_digest(t, mode) == python_fields(t, mode)


@pytest.mark.gpu
def test_native_gpu_op_trace_is_the_python_trace(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 8))
    model = model.cuda()
    x = torch.randn(32, 64, device="cuda")

    def step():
        model(x).sum().backward()
        model.zero_grad(set_to_none=True)

    a = _trace_lines(tmp_path, Tracer, step, "op")
    b = _trace_lines(tmp_path, NativeTracer, step, "op")
    assert a == b


def _race(tmp_path: Path, level: str) -> tuple[list[TraceEvent], str, str]:
    """A 256 MiB tensor digested on the side stream, then written in place at once."""
    x = torch.randn(64 << 20, device="cuda")
    want_before = digest_now(x * 1, "xor")["digest"]
    want_after = digest_now(x * 2, "xor")["digest"]
    ident = torch.nn.Identity()
    cfg = CaptureConfig(out_dir=tmp_path, level=level)
    with NativeTracer(cfg, side_stream=True) as tr:
        tr.step(0)
        y = ident(x * 1)
        y.mul_(2)
        y2 = ident(y)
        del y, y2
        z = torch.zeros_like(x)  # may take the memory of y's digest in flight: it must not
        z.add_(1)
        tr.end_step()
    return _events(tmp_path), want_before, want_after


@pytest.mark.gpu
@pytest.mark.parametrize("level", ["module", "op"])
def test_native_side_stream_digest_is_of_the_bytes_before_an_inplace_write(tmp_path, level):
    for attempt in range(5):
        out = tmp_path / f"{attempt}"
        ev, before, after = _race(out, level)
        mods = [e for e in ev if e.kind == "module"]
        assert mods[0].outputs[0].digest == before
        assert mods[1].inputs[0].digest == after
        if level == "op":
            mul = next(e for e in ev if e.name == "aten::mul.Tensor")
            inplace = next(e for e in ev if e.name == "aten::mul_.Tensor")
            assert mul.outputs[0].digest == before
            assert inplace.inputs[0].digest == before
            assert inplace.outputs[0].digest == after

import pytest
import torch

from triage_agent.fingerprint import digest as dg
from triage_agent.fingerprint import digest_words as dw
from triage_agent.fingerprint.digest import digest_now, readback, stage


def _py_order(t: torch.Tensor) -> str:
    """Independent reference of the documented order digest, in plain Python integers."""
    raw = dg.int_view(t).view(torch.uint8).tolist()
    nbytes = len(raw)
    raw += [0] * (-nbytes % 4)
    m = 0xFFFFFFFF
    la = lb = 0
    for i in range(len(raw) // 4):
        w = raw[4 * i] | raw[4 * i + 1] << 8 | raw[4 * i + 2] << 16 | raw[4 * i + 3] << 24
        x = w ^ ((i * dw.KA + (i >> 32)) & m)
        x ^= x >> 16
        x = x * dw.MUL & m
        x ^= x >> 13
        x = x * dw.MUL2 & m
        x ^= x >> 16
        y = (w + ((i * dw.KB + (i >> 32)) & m)) * dw.MUL3 & m
        y ^= y >> 15
        la, lb = (la + x) & m, (lb + y) & m
    return f"{((la << 32) | lb) ^ dw.length_key(nbytes):016x}"


@pytest.mark.parametrize(
    "t",
    [
        torch.arange(7, dtype=torch.int8),
        torch.randn(5).bfloat16(),
        torch.randn(3, 3),
        torch.arange(5, dtype=torch.int64) * -3,
    ],
)
def test_digest_order_matches_reference(t):
    assert digest_now(t, "order")["order"] == _py_order(t)


def test_digest_dtype_and_signed_zero_are_different_tensors():
    a = torch.tensor([1.0, 2.0, 3.0])
    assert digest_now(a)["digest"] != digest_now(a.bfloat16())["digest"]
    assert digest_now(a)["order"] != digest_now(a.double())["order"]
    assert digest_now(torch.tensor([0.0]))["order"] != digest_now(torch.tensor([-0.0]))["order"]
    assert digest_now(torch.tensor([0.0]))["digest"] != digest_now(torch.tensor([-0.0]))["digest"]


def test_digest_nan_payloads_count():
    a = torch.tensor([0x7FC00000, 0x7FC00001], dtype=torch.int32).view(torch.float32)
    assert torch.isnan(a).all()
    assert digest_now(a[:1])["order"] != digest_now(a[1:])["order"]
    assert digest_now(a[:1])["digest"] != digest_now(a[1:])["digest"]


def test_digest_order_catches_adjacent_swap_xor_does_not():
    # floats: integer and bool tensors always get the order digest (test_digest_integers)
    a = torch.tensor([5.0, 9.0, 1.0, 7.0])
    b = torch.tensor([5.0, 1.0, 9.0, 7.0])
    assert digest_now(a)["digest"] == digest_now(b)["digest"]  # documented blindness
    assert digest_now(a)["order"] != digest_now(b)["order"]


def test_digest_chunking_does_not_change_value(monkeypatch):
    t = torch.randn(1001)
    want = digest_now(t, "order")
    monkeypatch.setattr(dw, "CHUNK", 7)
    assert digest_now(t, "order") == want


def test_digest_empty_noncontiguous_and_odd_dtypes():
    assert digest_now(torch.zeros(0, 3))["digest"] == "empty"
    assert digest_now(torch.zeros(0, 3))["shape"] == [0, 3]
    m = torch.randn(4, 6)
    assert digest_now(m.t()) == {**digest_now(m.t().contiguous())}
    for t in (
        torch.randn(3, dtype=torch.complex64),
        torch.zeros(3, dtype=torch.uint16),
        torch.tensor([1, 0, 1], dtype=torch.bool),
        torch.randn(4).to(torch.float8_e4m3fn),
        torch.zeros(3, dtype=torch.uint32),
    ):
        rec = digest_now(t)
        assert rec["numel"] == t.numel() and rec["dtype"] == str(t.dtype).removeprefix("torch.")
        assert len(rec["order"]) == 16


def test_digest_staged_values_resolve_only_at_readback():
    s = stage(torch.randn(10), "both")
    assert s.xor_value is None and isinstance(s.xor, torch.Tensor)
    readback([s, None])
    assert s.xor_value is not None and s.order_value is not None and s.xor is None


def test_digest_bitcast_view_path_equals_contiguous_copy():
    # the xor digest hashes a same-width integer view with no copy; it must equal the
    # digest of the contiguous integer view (the order path's input) for any layout
    base = torch.randn(6, 10, requires_grad=True)
    for t in (
        base * 1,
        (base * 1).t(),
        base.detach().bfloat16()[:, 2:7],
        base.detach()[1:2].expand(4, 10),
        base.detach().double()[::2],
        torch.arange(12, dtype=torch.int8).view(torch.float8_e4m3fn).reshape(3, 4).t(),
    ):
        fast = stage(t, "xor")
        ref = dg.xor_digest(dg.int_view(t))
        readback([fast])
        assert fast.xor_value == ref.view(torch.int64).item()
        assert digest_now(t, "xor")["digest"] == digest_now(t, "both")["digest"]

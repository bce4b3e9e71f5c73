"""Byte confirmation: counts, ULP distance, bit histogram, first indices."""

from __future__ import annotations

import numpy as np
import pytest

from triage_agent.compare import confirm_bytes
from triage_agent.errors import InputError


def test_bytes_npy_one_ulp_and_signed_zero(tmp_path):
    a = np.array([1.0, 0.0, 2.0, 3.0], dtype=np.float32)
    b = a.copy()
    b[0] = np.nextafter(np.float32(1.0), np.float32(2.0))
    b[1] = -0.0
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    rep = confirm_bytes(tmp_path / "a.npy", tmp_path / "b.npy")
    t = rep.tensors[0]
    assert not rep.equal and t.differing == 2
    assert t.first_indices == [[0], [1]]
    assert t.bit_histogram == {0: 1, 31: 1}
    assert t.max_ulp == 1  # -0.0 and 0.0 are 0 ULP apart on the ordered line but differ in bits


def test_bytes_pt_bf16_and_dtype_mismatch(tmp_path):
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    y = x.clone()
    y[1, 2] = torch.tensor(5.0, dtype=torch.bfloat16).view(torch.int16).add(3).view(torch.bfloat16)
    torch.save({"out": x}, tmp_path / "a.pt")
    torch.save({"out": y}, tmp_path / "b.pt")
    rep = confirm_bytes(tmp_path / "a.pt", tmp_path / "b.pt")
    t = rep.tensors[0]
    assert t.name == "out" and t.dtype == "bfloat16"
    assert t.differing == 1 and t.max_ulp == 3 and t.first_indices == [[1, 2]]
    torch.save({"out": x.float()}, tmp_path / "c.pt")
    rep2 = confirm_bytes(tmp_path / "a.pt", tmp_path / "c.pt")
    assert "dtypes differ" in rep2.tensors[0].note and not rep2.equal


def test_bytes_identical_and_missing(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(5, dtype=np.int64))
    assert confirm_bytes(tmp_path / "a.npy", tmp_path / "a.npy").equal
    with pytest.raises(InputError, match="not found"):
        confirm_bytes(tmp_path / "a.npy", tmp_path / "zz.npy")

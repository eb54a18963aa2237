"""Token alignment's product in integers (memlife.token_match.sign_dots, memlife.int8_matmul):
the bits unpacked to bytes, the question rounded to int8, onnxruntime's MatMulInteger."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.int8_matmul import matmul_u8s8
from memlife.token_match import UNPACK_BLOCK, quantise, sign_dots


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 5),
    st.sampled_from([1, 7, UNPACK_BLOCK - 1, UNPACK_BLOCK, UNPACK_BLOCK + 1, 3 * UNPACK_BLOCK + 5]),
    st.sampled_from([8, 24, 384]),
)
def test_sign_dots_equal_the_dot_with_every_token_signs(
    seed: int, t: int, n: int, dim: int
) -> None:
    """Every candidate token, on every side of a block edge, gets the dot of the question
    rounded to int8 with its +-1 signs (bit set: +1) written out in full, and that is
    within the rounding bound (dim * scale per row) of the float question's dot."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((t, dim)).astype(np.float32)
    bits = rng.integers(0, 256, (n, dim // 8), dtype=np.uint8)
    signs = np.unpackbits(bits, axis=1).astype(np.float64) * 2 - 1
    got = sign_dots(q, bits, dim)
    assert got.shape == (t, n) and got.dtype == np.float32
    ints, scale = quantise(q)
    rounded = ints.astype(np.float64) * scale[:, None]
    # q.(2b-1) with q.b taken on the rounded question and sum(q) on the exact one
    want = (rounded @ (signs.T + 1)) - q.sum(axis=1, keepdims=True)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-4)
    assert np.all(np.abs(got - q @ signs.T) <= dim * scale[:, None] + 1e-4)


def test_quantise_keeps_each_row_within_half_a_step_and_a_zero_row_at_zero() -> None:
    rng = np.random.default_rng(3)
    q = rng.standard_normal((6, 384)).astype(np.float32)
    q[2] = 0.0
    q[4] *= 1e-6
    ints, scale = quantise(q)
    assert ints.dtype == np.int8 and np.abs(ints).max() == 127
    assert scale[2] == 1.0 and not ints[2].any()
    assert np.all(np.abs(ints * scale[:, None] - q) <= scale[:, None] / 2 + 1e-9)


def test_the_integer_product_is_exact_at_its_extremes() -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(0, 2, (1000, 384), dtype=np.uint8)
    a[0] = 1
    b = rng.integers(-127, 128, (384, 7), dtype=np.int8)
    b[:, 0] = -127
    got = matmul_u8s8(a, b)
    assert got.dtype == np.int32
    assert np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    assert got[0, 0] == -127 * 384
    assert matmul_u8s8(a[:0], b).shape == (0, 7)
    # k = 0 right after a product of -127s: zeros, not the buffer the last run left
    matmul_u8s8(np.ones((4, 8), np.uint8), np.full((8, 3), -127, np.int8))
    assert not matmul_u8s8(np.zeros((4, 0), np.uint8), np.zeros((0, 3), np.int8)).any()


def test_a_tampered_product_graph_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlife import int8_matmul

    bad = tmp_path / "int8_matmul.onnx"
    bad.write_bytes(int8_matmul.GRAPH_PATH.read_bytes() + b"\0")
    monkeypatch.setattr(int8_matmul, "GRAPH_PATH", bad)
    monkeypatch.setattr(int8_matmul, "_session", None)
    with pytest.raises(RuntimeError, match="sha256"):
        int8_matmul.matmul_u8s8(np.ones((2, 8), np.uint8), np.ones((8, 1), np.int8))

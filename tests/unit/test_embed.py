"""The bundled MiniLM embedder: real model, real tokenizer, no downloads."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from memlife.embed import (
    DIM,
    TOKENIZER_PATH,
    TOKENIZER_SHA256,
    Embedder,
    EmbeddingModelError,
    MiniLMEmbedder,
    default_embedder,
)


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


def test_bundled_tokenizer_is_the_pinned_file() -> None:
    assert hashlib.sha256(TOKENIZER_PATH.read_bytes()).hexdigest() == TOKENIZER_SHA256


def test_protocol_shape_and_normalisation(emb: MiniLMEmbedder) -> None:
    assert isinstance(emb, Embedder)
    assert emb.model_id == "all-MiniLM-L6-v2-onnx-int8" and emb.dim == DIM == 384
    v = emb.embed(["I only drink green tea.", "The car is red.", "x"])
    assert v.dtype == np.float32 and v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert emb.embed([]).shape == (0, 384)


def test_semantics(emb: MiniLMEmbedder) -> None:
    q, tea, car, meeting = emb.embed(
        [
            "What do I usually drink?",
            "I only drink green tea, never coffee.",
            "My car needs new tyres.",
            "The budget meeting moved to Thursday.",
        ]
    )
    assert q @ tea > q @ car + 0.1 and q @ tea > q @ meeting + 0.1


def test_deterministic_and_batch_independent(emb: MiniLMEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about hiking in the alps", "tea"]
    a = emb.embed(texts)
    b = emb.embed(texts)
    np.testing.assert_array_equal(a, b)
    # Padding to a longer batch must not change a text's vector (mask-aware pooling).
    alone = emb.embed(["short"])[0]
    np.testing.assert_allclose(a[0], alone, atol=1e-5)
    # Order is restored after the length sort.
    np.testing.assert_allclose(emb.embed(texts[::-1])[::-1], a, atol=1e-5)


def test_truncates_at_256_tokens(emb: MiniLMEmbedder) -> None:
    ids, mask = emb.tokenize(["word " * 1000, "hi"])
    assert ids.shape == (2, 256) and mask[0].sum() == 256 and mask[1].sum() == 3
    # Anything past the limit cannot influence the vector.
    head = "alpha beta gamma " * 100
    a, b = emb.embed([head + "tea coffee", head + "volcano earthquake"])
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_rejects_a_bare_string(emb: MiniLMEmbedder) -> None:
    with pytest.raises(TypeError):
        emb.embed("not a list")  # type: ignore[arg-type]


def test_default_embedder_is_a_singleton() -> None:
    assert default_embedder() is default_embedder()


def test_model_sha_mismatch_raises() -> None:
    with pytest.raises(EmbeddingModelError, match="sha256"):
        MiniLMEmbedder(model_sha256="0" * 64)


def test_tampered_tokenizer_raises(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    shutil.copy(TOKENIZER_PATH, bad)
    with bad.open("ab") as f:
        f.write(b" ")
    with pytest.raises(EmbeddingModelError, match="tokenizer"):
        MiniLMEmbedder(tokenizer_path=bad)


def test_missing_model_raises(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError, match="not found"):
        MiniLMEmbedder(model_path=tmp_path / "nope.onnx")


def test_threads_are_explicit() -> None:
    e = MiniLMEmbedder(intra_op_threads=1)
    assert e.intra_op_threads == 1 and e.inter_op_threads == 1
    np.testing.assert_allclose(e.embed(["tea"]), default_embedder().embed(["tea"]), atol=1e-5)

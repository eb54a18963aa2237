"""The coarse pass of recall (memlife/coarse.py): what it may change and what it may not.

- Scored over all rows it IS the exact ranking (same indices, same scores): the re-rank
  uses the ranking formula unchanged, threshold and time terms included.
- With the production share of candidates (2% of the rows) on clustered random data, the
  top-k it returns equals the exact top-k for nearly every query: the measured agreement
  is asserted here and reported in BENCHMARKS.md.
- Codes kept in step with appends and swap-removes equal codes built from scratch.
"""

from __future__ import annotations

import numpy as np
import pytest

import memlife.coarse as coarse_module
import memlife.retrieval as retrieval
from memlife.coarse import SignCodes
from memlife.lexical import LexicalIndex
from memlife.online.index import ShardIndex
from memlife.retrieval import rank

DIM = 384
WORDS = "tea coffee bicycle museum lisbon flight oslo dentist jazz desk boots report bread".split()


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Clustered unit vectors with a shared direction (like MiniLM's), texts, times, queries."""
    rng = np.random.default_rng(seed)
    common = rng.standard_normal(DIM)
    centres = rng.standard_normal((n // 50, DIM)) + 2.0 * common
    vecs = centres[rng.integers(0, len(centres), n)] + 0.6 * rng.standard_normal((n, DIM))
    vecs = np.ascontiguousarray(vecs / np.linalg.norm(vecs, axis=1, keepdims=True), np.float32)
    texts = [" ".join(rng.choice(WORDS, 3)) for _ in range(n)]
    created = 1.67e9 + np.sort(rng.uniform(0, 3e7, n))
    queries = vecs[rng.integers(0, n, 40)] + 0.04 * rng.standard_normal((40, DIM)).astype(
        np.float32
    )
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return vecs, texts, created, queries.astype(np.float32)


def _both(monkeypatch: pytest.MonkeyPatch, candidates: int, n: int = 20_000) -> list[tuple]:
    vecs, texts, created, queries = _data(n)
    lexical, codes = LexicalIndex(texts), SignCodes(vecs)
    monkeypatch.setattr(retrieval, "COARSE_MIN_ROWS", 1000)
    monkeypatch.setattr(coarse_module, "COARSE_CANDIDATES", candidates)
    out = []
    for i, qv in enumerate(queries):
        kw = {
            "k": 10,
            "threshold": 0.1,
            "query_text": " ".join(WORDS[i % 5 : i % 5 + 2]),
            "lexical": lexical,
            "created": created,
        }
        out.append((rank(qv, vecs, **kw), rank(qv, vecs, coarse=codes, **kw)))
    return out


def test_scored_over_every_row_the_coarse_path_is_the_exact_ranking(monkeypatch) -> None:
    for exact, coarse in _both(monkeypatch, candidates=10**6, n=3000):
        assert list(coarse.indices) == list(exact.indices)
        np.testing.assert_allclose(coarse.scores, exact.scores, rtol=0, atol=1e-5)
        np.testing.assert_allclose(coarse.similarities, exact.similarities, rtol=0, atol=1e-5)


def test_with_two_percent_of_the_rows_the_top_k_is_the_exact_one(monkeypatch) -> None:
    pairs = _both(monkeypatch, candidates=400)  # 2% of 20k, as 2,000 of 100k
    same = sum(list(c.indices) == list(e.indices) for e, c in pairs)
    overlap = np.mean([len(set(c.indices) & set(e.indices)) / max(len(e), 1) for e, c in pairs])
    assert same >= 0.95 * len(pairs), (same, overlap)
    assert overlap >= 0.99, (same, overlap)


def test_the_estimate_alone_is_not_the_ranking() -> None:
    """The agreement above is the exact re-rank's doing: the estimate's own order differs."""
    vecs, _, _, queries = _data(20_000)
    codes = SignCodes(vecs)
    differ = 0
    for qv in queries:
        exact = np.argsort(-(vecs @ qv), kind="stable")[:10]
        rough = np.argsort(-codes.estimate(qv), kind="stable")[:10]
        differ += list(exact) != list(rough)
    assert differ > len(queries) // 2


def test_codes_kept_in_step_with_writes_equal_codes_built_afresh() -> None:
    vecs, texts, created, _ = _data(600)
    shard = ShardIndex("u-1", "/n", DIM)
    for i in range(400):
        shard.append(f"m-{i}", texts[i], vecs[i])
    import memlife.online.index as index

    index.COARSE_MIN_ROWS, saved = 100, index.COARSE_MIN_ROWS
    try:
        codes = shard.coarse()
    finally:
        index.COARSE_MIN_ROWS = saved
    assert codes is not None
    for i in range(400, 600):
        shard.append(f"m-{i}", texts[i], vecs[i])
    for i in range(0, 600, 7):
        shard.remove(f"m-{i}")
    fresh = SignCodes(shard.vectors, center=codes.center)
    assert len(codes) == len(fresh) == shard.n
    # one row is rotated alone, many together: the same up to float rounding, which may
    # flip the sign bit of a coordinate within ~1e-7 of zero
    n = shard.n
    np.testing.assert_allclose(codes._norms[:n], fresh._norms[:n], rtol=1e-5)
    flipped = np.bitwise_count(codes._codes[:, :n] ^ fresh._codes[:, :n]).sum()
    assert flipped <= 1e-3 * n * DIM
    w = vecs[5] - codes.center
    np.testing.assert_allclose(codes.estimate(w), fresh.estimate(w), atol=0.02)

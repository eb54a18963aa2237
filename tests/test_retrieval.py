"""Recall ranking: dense + BM25 fusion, threshold, top-k order; real MiniLM vectors."""

from __future__ import annotations

import numpy as np
import pytest

from memlife.embed import default_embedder
from memlife.retrieval import LexicalIndex, rank, search, tokenize

FACTS = [
    "I only drink green tea, never coffee.",
    "My sister lives in Lisbon.",
    "The quarterly report is due on Friday.",
    "I am allergic to peanuts.",
    "We adopted a rescue dog named Biscuit.",
]


@pytest.fixture(scope="module")
def vecs() -> np.ndarray:
    return default_embedder().embed(FACTS)


def test_drink_question_finds_the_tea_fact(vecs: np.ndarray) -> None:
    hits = search("What do I usually drink?", vecs, k=3, texts=FACTS)
    assert hits.indices[0] == 0
    dense = search("What do I usually drink?", vecs, k=3)  # dense only, same answer
    assert dense.indices[0] == 0


def test_scores_sorted_and_k_respected(vecs: np.ndarray) -> None:
    hits = search("Where does my sister live?", vecs, k=2, texts=FACTS)
    assert len(hits) == 2 and hits.indices[0] == 1
    assert hits.scores[0] >= hits.scores[1]
    assert hits.indices.dtype == np.int64


def test_threshold_filters_on_cosine(vecs: np.ndarray) -> None:
    q = default_embedder().embed(["What is my dog called?"])[0]
    sims = vecs @ q
    cut = float(np.sort(sims)[-2])  # keeps exactly the two most similar
    hits = rank(q, vecs, k=5, threshold=cut, query_text="What is my dog called?", texts=FACTS)
    assert set(hits.indices) == set(np.argsort(-sims)[:2])
    assert (hits.similarities >= cut).all()
    assert len(rank(q, vecs, k=5, threshold=0.99)) == 0


def test_lexical_term_reorders_on_a_rare_word() -> None:
    # Orthogonal-ish toy vectors with equal cosine: only BM25 can break the tie.
    vectors = np.eye(3, 4, dtype=np.float32)
    q = np.array([0.5, 0.5, 0.5, 0.0], dtype=np.float32)
    texts = ["a walk in the park", "the Zanzibar trip", "a walk to the shop"]
    dense = rank(q, vectors, k=3)
    assert list(dense.indices) == [0, 1, 2]  # ties broken by index
    hybrid = rank(q, vectors, k=3, query_text="When was the Zanzibar trip?", texts=texts)
    assert hybrid.indices[0] == 1
    off = rank(q, vectors, k=3, query_text="Zanzibar", texts=texts, lexical_weight=0.0)
    assert list(off.indices) == [0, 1, 2]


def test_bm25_index_scores() -> None:
    idx = LexicalIndex(["green tea every morning", "coffee", "teas and teas and more teas"])
    s = idx.scores("Which teas?")
    assert s.dtype == np.float32 and s[1] == 0 and s[0] > 0 and s[2] > s[0]  # stemmed tf
    assert idx.scores("the of and").sum() == 0  # stopwords only
    assert tokenize("Running dogs!") == ["run", "dog"]


def test_index_mismatch_and_bad_input_raise(vecs: np.ndarray) -> None:
    q = vecs[0]
    with pytest.raises(ValueError, match="lexical index"):
        rank(q, vecs, query_text="tea", lexical=LexicalIndex(["tea"]))
    with pytest.raises(ValueError, match="dim"):
        rank(q[:10], vecs)
    with pytest.raises(ValueError):
        rank(q, vecs, k=0)


def test_empty_and_small_candidate_sets(vecs: np.ndarray) -> None:
    empty = rank(vecs[0], np.zeros((0, 384), np.float32), k=5, query_text="x", texts=[])
    assert len(empty) == 0
    assert len(rank(vecs[0], vecs[:2], k=10)) == 2


def test_top_k_matches_full_sort_at_scale() -> None:
    rng = np.random.default_rng(0)
    m = rng.normal(size=(5000, 384)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    q = m[17]
    plain = rank(q, m, k=10, centroid_weight=0.0)
    assert list(plain.indices) == list(np.argsort(-(m @ q), kind="stable")[:10])
    assert plain.indices[0] == 17
    hits = rank(q, m, k=10)  # centroid-corrected: v . (q - a * mu)
    mu = m.mean(axis=0)
    assert list(hits.indices) == list(np.argsort(-(m @ (q - 0.75 * mu)), kind="stable")[:10])
    np.testing.assert_allclose(hits.similarities, m[hits.indices] @ q, rtol=1e-5)


def test_centroid_correction_demotes_hubs_and_is_mean_zero() -> None:
    # Records 0..2 share a common direction (e0); record 3 is the odd one out. The query
    # is slightly closer (cosine) to record 0, but much of that is the direction every
    # record has: the correction prefers record 3.
    v = np.array([[0.8, 0.6, 0, 0], [0.8, 0, 0.6, 0], [0.8, 0, -0.6, 0], [0, 0, 0, 1]],
                 dtype=np.float32)  # fmt: skip
    q = 0.6 * v[0] + 0.57 * v[3]
    q /= np.linalg.norm(q)
    sims = v @ q
    assert sims[3] < sims[0] < sims[3] + 0.05  # plain cosine: the hub wins, narrowly
    assert rank(q, v, k=1, centroid_weight=0.0).indices[0] == 0
    hits = rank(q, v, k=4)
    assert hits.indices[0] == 3
    np.testing.assert_allclose(np.sort(hits.similarities), np.sort(sims), rtol=1e-6)
    # Mean-zero: the corrected scores average to the cosines' average (fair merging).
    assert np.isclose(hits.scores.mean(), sims.mean(), atol=1e-6)
    # One or two candidates: the correction is exactly zero.
    one = rank(q, v[:1], k=1)
    assert np.isclose(one.scores[0], sims[0])
    two = rank(q, v[1:3], k=2)
    np.testing.assert_allclose(np.sort(two.scores), np.sort(sims[1:3]), atol=1e-6)
    # A passed-in centroid is used as is; a wrong shape is refused.
    same = rank(q, v, k=4, centroid=v.mean(axis=0))
    assert list(same.indices) == list(hits.indices)
    with pytest.raises(ValueError, match="centroid"):
        rank(q, v, k=1, centroid=np.zeros(3, np.float32))

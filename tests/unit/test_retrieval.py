"""Recall ranking: dense + BM25 fusion, threshold, top-k order; real MiniLM vectors."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pytest

from memlife.embed import default_embedder
from memlife.lexical import LexicalIndex, tokenize
from memlife.retrieval import (
    CENTROID_WEIGHT,
    CONTEXT_WEIGHT,
    DATE_WEIGHT,
    rank,
    rank_sets,
    search,
)

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


def _naive_bm25(texts: list[str], query: str, k1: float = 1.5, b: float = 0.75) -> list[float]:
    """Okapi BM25 with Lucene idf, written out term by term (the reference)."""
    docs = [tokenize(t) for t in texts]
    n = len(docs)
    avg = (sum(len(d) for d in docs) / n) or 1.0
    out = []
    for d in docs:
        s = 0.0
        for term in set(tokenize(query)):
            tf = d.count(term)
            if not tf:
                continue
            df = sum(1 for other in docs if term in other)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            s += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * len(d) / avg))
        out.append(s)
    return out


def test_lexical_index_appends_and_removes_like_a_fresh_bm25() -> None:
    # Appends and swap-removes in random order; scores asked between changes (the weight
    # cache must follow every change) equal BM25 computed from scratch on the texts left.
    rng = random.Random(3)
    words = "tea coffee green drink dog Rex Lisbon sister Oslo lives morning never".split()
    idx = LexicalIndex()
    texts: list[str] = []
    queries = ("green tea", "dog Rex Lisbon", "never coffee morning", "unknown")
    for step in range(300):
        if texts and rng.random() < 0.3:
            row = rng.randrange(len(texts))
            idx.remove(row)
            texts[row] = texts[-1]  # the same swap-remove as the index
            texts.pop()
        else:
            t = " ".join(rng.choice(words) for _ in range(rng.randint(0, 8)))
            texts.append(t)
            assert idx.append(t) == len(texts) - 1
        if step % 7 == 0 and texts:
            for q in queries:
                want = _naive_bm25(texts, q)
                np.testing.assert_allclose(idx.scores(q), want, rtol=1e-5, atol=1e-6)
    assert len(idx) == len(texts)


@dataclass
class _Set:
    ids: list[str]
    vectors: np.ndarray
    lexical: LexicalIndex = field(init=False)
    created: np.ndarray = field(init=False)
    centroid: None = None
    texts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lexical = LexicalIndex(self.texts)
        self.created = np.zeros(len(self.ids))


def test_rank_sets_merges_the_sets_best_first(vecs: np.ndarray) -> None:
    """The best k of the union (tests/unit/test_rank_sets.py: as rank over the union)."""
    q = default_embedder().embed(["What does the user drink?"])[0]
    one = _Set(["a0", "a1", "a2"], vecs[:3], texts=FACTS[:3])
    two = _Set(["b3", "b4"], vecs[3:], texts=FACTS[3:])
    got = rank_sets(q, "What does the user drink?", [one, two], k=2, threshold=-1.0)
    assert len(got) == 2
    assert [r.score for r in got] == sorted((r.score for r in got), reverse=True)
    assert got[0].id == "a0" and (got[0].which, got[0].row) == (0, 0)
    assert rank_sets(q, "drink", [one, two], k=5, threshold=0.99) == []


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
    want = np.argsort(-(m @ (q - CENTROID_WEIGHT * mu)), kind="stable")[:10]
    assert list(hits.indices) == list(want)
    np.testing.assert_allclose(hits.similarities, m[hits.indices] @ q, rtol=1e-5)


def test_centroid_correction_demotes_hubs_and_is_mean_zero() -> None:
    # Records 0..2 share a common direction (e0); record 3 is the odd one out. The query
    # is slightly closer (cosine) to record 0, but much of that is the direction every
    # record has: the correction prefers record 3.
    v = np.array(
        [[0.8, 0.6, 0, 0], [0.8, 0, 0.6, 0], [0.8, 0, -0.6, 0], [0, 0, 0, 1]], dtype=np.float32
    )
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


# -- time terms: dates named in the query, conversation context ---------------------------
DAY = 86400.0
JUNE_16 = datetime(2023, 6, 16, 18, 0, tzinfo=UTC).timestamp()


def _flat(n: int) -> tuple[np.ndarray, np.ndarray]:
    """n identical candidates (every dense score ties) and a query vector."""
    v = np.tile(np.eye(1, 8, dtype=np.float32), (n, 1))
    return v, v[0].copy()


def test_date_in_query_prefers_records_created_then() -> None:
    v, q = _flat(4)
    created = np.array([JUNE_16 - 30 * DAY, JUNE_16 + 9 * DAY, JUNE_16, JUNE_16 + 5 * DAY])
    query = "What did Maria share on 16 June, 2023?"
    hits = rank(q, v, k=4, query_text=query, created=created, context_weight=0.0)
    # That day first, then within the grace week after; earlier or later records tie.
    assert list(hits.indices) == [2, 3, 0, 1]
    assert hits.scores[0] == pytest.approx(hits.scores[2] + DATE_WEIGHT)
    iso = rank(q, v, k=4, query_text="What did I save on 2023-06-16?", created=created,
               context_weight=0.0)  # fmt: skip
    assert list(iso.indices) == [2, 3, 0, 1]  # the day, not all of 2023
    month = rank(q, v, k=4, query_text="in June 2023", created=created, context_weight=0.0)
    assert list(month.indices) == [1, 2, 3, 0]  # all of June (and the week after) first
    off = rank(q, v, k=4, query_text=query, created=created, date_weight=0.0, context_weight=0.0)
    assert list(off.indices) == [0, 1, 2, 3]
    undated = rank(
        q, v, k=4, query_text="What did Maria share?", created=created, context_weight=0.0
    )
    assert list(undated.indices) == [0, 1, 2, 3]


def test_context_lifts_a_record_whose_conversation_matches() -> None:
    # Records 1 and 2 score the same; 2 was said in the same conversation (minutes apart)
    # as the strong hit 0, record 1 a week later: the context term breaks the tie for 2.
    v = np.eye(4, 8, dtype=np.float32)
    q = np.array([0.9, 0.3, 0.3, 0.1, 0, 0, 0, 0], np.float32)
    created = np.array([JUNE_16, JUNE_16 + 7 * DAY, JUNE_16 + 600, JUNE_16 + 14 * DAY])
    plain = rank(q, v, k=4, centroid_weight=0.0, created=created, context_weight=0.0)
    assert list(plain.indices) == [0, 1, 2, 3]
    hits = rank(q, v, k=4, centroid_weight=0.0, created=created, context_weight=0.2)
    assert list(hits.indices) == [0, 2, 1, 3]
    # Alone, a record counts its own score: scaled by (1 + weight), order kept.
    alone = rank(q, v, k=4, centroid_weight=0.0, created=JUNE_16 + DAY * np.arange(4) * 7)
    assert list(alone.indices) == [0, 1, 2, 3]
    want = (1 + CONTEXT_WEIGHT) * (v @ q)[alone.indices]
    np.testing.assert_allclose(alone.scores, want, rtol=1e-6)


def test_context_never_brings_back_a_record_below_threshold() -> None:
    v = np.eye(3, 8, dtype=np.float32)
    q = np.array([0.9, 0.2, 0.1, 0, 0, 0, 0, 0], np.float32)
    same_time = np.full(3, JUNE_16)
    hits = rank(q, v, k=3, threshold=0.15, centroid_weight=0.0, created=same_time)
    assert list(hits.indices) == [0, 1]  # record 2 (cosine 0.1) stays out
    none = rank(q, v, k=3, threshold=0.95, centroid_weight=0.0, created=same_time)
    assert len(none) == 0 and none.indices.dtype == np.int64  # all below: empty, no error


def test_context_is_computed_among_the_best_pool() -> None:
    rng = np.random.default_rng(3)
    m = rng.normal(size=(400, 32)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    created = np.repeat(np.arange(40) * DAY, 10)  # 40 conversations of 10 records
    q = m[5]
    hits = rank(q, m, k=80, created=created)
    assert len(hits) == 80 and len(set(hits.indices.tolist())) == 80
    # Reference, written out: the best CONTEXT_POOL (50) by the other terms; each gets
    # its best same-conversation neighbour among them, or its own score when it has none.
    mu = m.mean(0)
    base = (m @ q - CENTROID_WEIGHT * (m @ mu - mu @ mu)).astype(np.float64)
    pool = np.argsort(-base, kind="stable")[:80]  # k=80 > 50: the pool is the top k
    full = {}
    for i in pool:
        mates = [base[j] for j in pool if j != i and created[j] == created[i]]
        full[int(i)] = base[i] + CONTEXT_WEIGHT * (max(mates) if mates else base[i])
    want = sorted(full, key=lambda i: (-full[i], i))
    assert hits.indices.tolist() == want
    assert 5 in hits.indices[:3].tolist()


def test_created_must_match_the_candidates() -> None:
    v, q = _flat(3)
    with pytest.raises(ValueError, match="creation times"):
        rank(q, v, created=np.zeros(2))


def _full_rank_reference(q, m, *, k, threshold, query_text, lexical, created):  # noqa: ANN001, ANN202
    """rank() written the plain way: every term over every row, threshold mask, then the
    context term over the best CONTEXT_POOL (what rank() computed before it went lazy)."""
    from memlife.retrieval import CONTEXT_POOL, LEXICAL_WEIGHT, _context_scores, _date_bonus

    sims = m @ q
    mu = m.mean(axis=0)
    fused = sims - CENTROID_WEIGHT * (m @ mu - mu @ mu)
    bm = lexical.scores(query_text)
    if bm.max() > 0:
        fused = fused + LEXICAL_WEIGHT / bm.max() * bm
    bonus = _date_bonus(query_text, created)
    if bonus is not None:
        fused = fused + DATE_WEIGHT * bonus
    fused = np.where(sims >= threshold, fused, -np.inf)
    pool = np.lexsort((np.arange(len(fused)), -fused))[: max(CONTEXT_POOL, k)]
    pool = pool[np.isfinite(fused[pool])]
    if len(pool) == 0:
        return pool, np.zeros(0, np.float32), np.zeros(0, np.float32)
    scores = _context_scores(fused[pool], created[pool], CONTEXT_WEIGHT)
    order = np.lexsort((pool, -scores))[:k]
    return pool[order], scores[order], sims[pool[order]]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("threshold", [-1.0, 0.3, 0.6, 0.95])
def test_lazy_threshold_ranking_equals_the_full_computation(seed: int, threshold: float) -> None:
    # Clustered vectors (some rows near the query, most far), words shared across rows,
    # conversations of 20 and a query that names a month: every term is in play, and the
    # thresholds range from "all pass" through "few pass" to "none pass" (widening path).
    rng = np.random.default_rng(seed)
    n, dim = 3000, 64
    centres = rng.normal(size=(12, dim))
    m = centres[rng.integers(0, 12, n)] + rng.normal(scale=0.8, size=(n, dim))
    m = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
    q = (centres[0] + rng.normal(scale=0.5, size=dim)).astype(np.float32)
    q /= np.linalg.norm(q)
    words = "tea lisbon dog report peanuts bicycle jazz oslo boots yoga".split()
    texts = [" ".join(rng.choice(words, 3)) for _ in range(n)]
    created = 1672531200.0 + (np.arange(n) // 20) * 6 * 3600.0
    query = "what about tea and the dog in January 2023?"
    lexical = LexicalIndex(texts)
    for k in (1, 10, 80):
        got = rank(
            q, m, k=k, threshold=threshold, query_text=query, lexical=lexical, created=created
        )
        idx, scores, sims = _full_rank_reference(
            q, m, k=k, threshold=threshold, query_text=query, lexical=lexical, created=created
        )
        assert list(got.indices) == list(idx)
        np.testing.assert_allclose(got.scores, scores, atol=1e-5)
        np.testing.assert_allclose(got.similarities, sims, atol=1e-6)
        assert (got.similarities >= threshold).all()
        assert len(got) > 0 or threshold == 0.95  # the lazy widening path is exercised too


def test_words_of_every_script_are_bm25_terms_and_ascii_text_is_read_as_before() -> None:
    """BM25 read [a-z0-9] only: a Cyrillic or Hindi memory had no lexical term at all and
    'café' was 'caf'. Accents and case are folded, any script kept; ASCII text is untouched."""
    assert tokenize("Иван любит чай") == tokenize("ИВАН ЛЮБИТ ЧАЙ") != []
    assert tokenize("Zoë ordered a café crème") == tokenize("Zoe ordered a cafe creme")
    assert tokenize("हिन्दी पाठ") == ["हिन्दी", "पाठ"]  # vowel signs stay inside their word
    assert tokenize("東京に行った") != []
    assert tokenize("The dogs' café isn't open") == tokenize("the dogs cafe isn t open")
    assert tokenize("x\ud800y") == ["x", "y"]  # a lone surrogate is no word and no error
    idx = LexicalIndex(["Иван любит чай", "Maria drinks coffee", "Zoë aime le café"])
    assert int(np.argmax(idx.scores("Что любит Иван?"))) == 0
    assert int(np.argmax(idx.scores("cafe"))) == 2


def test_chinese_and_japanese_words_are_found_inside_sentences_written_without_spaces() -> None:
    """A sentence without spaces was one BM25 term: "東京" never matched "私は東京タワーに
    行きました". Runs of Han and kana are read as overlapping bigrams and single characters;
    a word of another script beside them stays whole, and Hangul keeps its spaces."""
    memories = ["私は東京タワーに行きました", "大阪城を見ました", "我喜欢喝咖啡", "他喜欢喝茶"]
    idx = LexicalIndex(memories)
    assert int(np.argmax(idx.scores("東京タワーはどこ"))) == 0
    assert int(np.argmax(idx.scores("大阪"))) == 1
    assert int(np.argmax(idx.scores("谁喜欢咖啡?"))) == 2
    assert int(np.argmax(idx.scores("茶"))) == 3  # one character alone is a term too
    assert tokenize("東京タワー") == ["東京", "京タ", "タワ", "ワー", "東", "京", "タ", "ワ", "ー"]
    assert tokenize("iPhone手机") == ["iphon", "手机", "手", "机"]
    assert tokenize("한국어 문장") == ["한국어", "문장"]
    assert tokenize("ｶﾀｶﾅ") == tokenize("カタカナ")  # half-width kana fold to full width
    assert "人々" in tokenize("人々が集まった") and "𠮷野" in tokenize("𠮷野家")  # 々, 𠮷


def test_thai_lao_khmer_and_burmese_words_are_found_inside_unspaced_sentences() -> None:
    """These scripts put no space between words either: "ข้าวผัด" (fried rice) was never found
    in "ฉันชอบกินข้าวผัด" (I like eating fried rice), each sentence being one term."""
    memories = [
        "ฉันชอบกินข้าวผัด",  # Thai: I like eating fried rice
        "ฉันชอบดูหนัง",  # Thai: I like watching films
        "ຂ້ອຍມັກກິນເຂົ້າໜຽວ",  # Lao: I like eating sticky rice
        "ខ្ញុំចូលចិត្តកាហ្វេ",  # Khmer: I like coffee
        "ကျွန်တော်ကော်ဖီကြိုက်တယ်",  # Burmese: I like coffee
    ]
    idx = LexicalIndex(memories)
    for query, want in [("ข้าวผัด", 0), ("หนัง", 1), ("ເຂົ້າໜຽວ", 2), ("កាហ្វេ", 3), ("ကော်ဖီ", 4)]:
        scores = idx.scores(query)
        assert int(np.argmax(scores)) == want and (scores > 0).sum() == 1, query
    assert "ก" in tokenize("ก") and "ผั" in tokenize("ข้าวผัด")  # one letter alone is itself
    assert "ข" not in tokenize("ข้าวผัด")  # no single letters: they would match every text
    # the vowel signs and viramas inside a Khmer or Burmese word keep it whole (review of
    # session 20: "កាហ្វេ" was cut into the letters "ក", "ហ", "វ")
    for word in ("កាហ្វេ", "ကော်ဖီ", "ខ្ញុំចូលចិត្តតែ។", "ကျွန်တော်ကော်ဖီကြိုက်တယ်။"):
        assert tokenize(word) and all(len(t) == 2 for t in tokenize(word)), word

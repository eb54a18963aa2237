"""Recall over several namespaces ranks as recall over their union: ``rank_sets`` on any
split of a set of memories gives ``rank``'s ranking of the whole (session 24: each
namespace was ranked alone, its own best BM25 hit taken as full marks, its own centroid,
its own pool for token alignment and the context term, and a neighbour in another
namespace did not count: on LoCoMo, an actor's observations kept in one namespace per
speaker lost 0.016 recall@5 against the same memories in one)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.lexical import LexicalIndex
from memlife.retrieval import CONTEXT_POOL, rank, rank_sets
from memlife.token_match import QueryTokens, TokenCodes, pack

DIM = 16
WORDS = ["tea", "coffee", "lisbon", "dog", "report", "friday", "peanuts", "garden", "piano",
         "camping", "may", "sister"]  # fmt: skip
SPEAKERS = ["", "Ann: ", "Bob: ", "May: "]
SESSIONS = [datetime(2023, 5, d, 14, tzinfo=UTC).timestamp() for d in (1, 8, 20)]


@dataclass
class _Set:
    ids: list[str]
    vectors: np.ndarray
    texts: list[str]
    created: np.ndarray
    codes: list[TokenCodes] | None
    lexical: LexicalIndex = field(init=False)
    centroid: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.lexical = LexicalIndex(self.texts)

    def token_codes(self, rows: np.ndarray) -> list[TokenCodes | None]:
        if self.codes is None:  # kept none (a set embedded before token codes)
            return [None] * len(rows)
        return [self.codes[int(r)] for r in rows]


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@st.composite
def corpora(draw: st.DrawFn) -> tuple:
    n = draw(st.integers(1, 2 * CONTEXT_POOL + 20))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    texts = [SPEAKERS[rng.integers(4)] + " ".join(rng.choice(WORDS, rng.integers(1, 6)))
             for _ in range(n)]  # fmt: skip
    vectors = _unit(rng.standard_normal((n, DIM)))
    dup = draw(st.integers(0, n - 1))  # a repeated memory: a tie both must break alike
    vectors[dup] = vectors[0]
    texts[dup] = texts[0]
    created = np.array([SESSIONS[rng.integers(3)] + 60.0 * rng.integers(0, 60) for _ in range(n)])
    codes = [pack(rng.standard_normal((int(rng.integers(1, 6)), DIM)), rng.integers(0, 8, 5)[:0])
             for _ in range(n)]  # fmt: skip
    codes = [TokenCodes(pieces=rng.integers(0, 8, len(c.bits)).astype(np.uint16), bits=c.bits)
             for c in codes]  # fmt: skip
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, n - 1)), max_size=4))) - {n})
    query = " ".join(rng.choice(WORDS + ["Ann", "Bob", "May", "on 8 May 2023"], 3))
    t = int(rng.integers(0, 4))
    qtok = QueryTokens(states=_unit(rng.standard_normal((t, DIM))) if t else
                       np.zeros((0, DIM), np.float32), pieces=rng.integers(0, 8, t))  # fmt: skip
    return texts, vectors, created, codes, cuts, query, qtok, _unit(rng.standard_normal(DIM))


ROUNDING = 1e-6  # float32 products of one row in two matrices may differ in the last bit


def assert_same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    """The same ids in the same order, with the same scores, except that memories whose
    scores are a float rounding apart may come in either order (and either may take the
    last place): each set scores its own rows, and BLAS may sum one row in another order
    in another matrix (a repeated memory in two sets scored 4e-8 apart). Scores exactly
    equal are ties, and ties go by id on both sides."""
    assert len(got) == len(want)
    g_scores, w_scores = [s for _, s in got], [s for _, s in want]
    np.testing.assert_allclose(g_scores, w_scores, rtol=1e-5, atol=ROUNDING)
    for ranked in (got, want):
        for (a, sa), (b, sb) in itertools.pairwise(ranked):
            assert sa > sb or (sa == sb and a < b), (a, sa, b, sb)  # best first, ties by id
    start = 0
    while start < len(want):  # runs of scores a rounding apart
        end = start + 1
        while end < len(want) and w_scores[end - 1] - w_scores[end] <= ROUNDING:
            end += 1
        if end < len(want):  # a run before the cut holds the same memories
            assert {i for i, _ in got[start:end]} == {i for i, _ in want[start:end]}
        start = end


@settings(max_examples=150, deadline=None)
@given(corpora(), st.integers(1, 12), st.sampled_from([None, -1.0, 0.0, 0.3]),
       st.booleans())  # fmt: skip
def test_any_split_ranks_as_the_union(corpus, k, threshold, with_codes) -> None:
    texts, vectors, created, codes, cuts, query, qtok, qv = corpus
    n = len(texts)
    ids = [f"r{i:04d}" for i in range(n)]  # in row order: ties by id are ties by row
    bounds = [0, *cuts, n]
    sets = [_Set(ids[a:b], vectors[a:b], texts[a:b], created[a:b],
                 codes[a:b] if with_codes else None) for a, b in itertools.pairwise(bounds)]  # fmt: skip
    thr = -1.0 if threshold is None else threshold
    got = rank_sets(qv, query, sets, k=k, threshold=thr, query_tokens=qtok)

    whole = rank(
        qv, vectors, k=k, threshold=thr, query_text=query, lexical=LexicalIndex(texts),
        centroid=vectors.astype(np.float64).mean(axis=0).astype(np.float32), created=created,
        query_tokens=qtok if with_codes else None,
        token_codes=(lambda rows: [codes[int(r)] for r in rows]) if with_codes else None,
    )  # fmt: skip
    want = [(ids[int(i)], float(s)) for i, s in zip(whole.indices, whole.scores, strict=True)]
    assert_same_ranking([(r.id, r.score) for r in got], want)
    for r in got:  # each hit names its set and row
        assert sets[r.which].ids[r.row] == r.id


def test_a_weak_namespace_no_longer_gets_full_lexical_marks() -> None:
    """A namespace whose best BM25 hit shares one common word with the question was
    max-normalised on its own to full marks, as high as the other namespace's exact
    match: merged, a vague memory outranked a precise one."""
    rng = np.random.default_rng(7)
    base = _unit(rng.standard_normal(DIM))
    noise = [_unit(base + 0.05 * rng.standard_normal(DIM)) for _ in range(4)]
    exact = _Set(["a0", "a1"], np.stack(noise[:2]),
                 ["my sister lives in lisbon near the garden", "the report is due friday"],
                 np.array(SESSIONS[:2]), None)  # fmt: skip
    vague = _Set(["b0", "b1"], np.stack(noise[2:]), ["the garden is green", "piano lessons"],
                 np.array(SESSIONS[1:]), None)  # fmt: skip
    got = rank_sets(base, "where does my sister live in lisbon garden", [exact, vague], k=2,
                    threshold=-1.0)  # fmt: skip
    whole = rank_sets(base, "where does my sister live in lisbon garden",
                      [_Set(["a0", "a1", "b0", "b1"], np.concatenate([exact.vectors, vague.vectors]),
                            exact.texts + vague.texts, np.concatenate([exact.created, vague.created]),
                            None)], k=2, threshold=-1.0)  # fmt: skip
    assert [r.id for r in got] == [r.id for r in whole]
    lexical = {r.id: r.score for r in got}
    assert lexical["a0"] > lexical.get("b0", -np.inf)

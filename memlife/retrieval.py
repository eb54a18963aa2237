"""Recall ranking: dense cosine fused with BM25, pure and shared by online recall and the gate.

Why hybrid: on the LoCoMo recall task (bench/recall_locomo.py) MiniLM alone gets
recall@5 0.734 and BM25 0.708; adding a max-normalised BM25 term to the cosine
(``cos + w * bm25 / max(bm25)``) gets 0.783. BM25 rescues names and rare nouns a
sentence vector blurs; max-normalising keeps it on the cosine's 0..1 scale.

Centroid correction (hubness): sentence vectors of one actor's memories share a common
direction (MiniLM is anisotropic; the mean cosine of a LoCoMo fact to its conversation's
centroid is 0.36), so records that sit near the centroid look similar to every query.
The dense term is therefore ``cos(q, v) - a * (v - mu) . mu`` with ``mu`` the mean of the
candidate vectors: ranking by ``v . (q - a*mu)``, i.e. the query is moved away from what
all records have in common (the dense counterpart of idf). The ``- mu . mu`` keeps the
correction mean-zero over the candidates; for one or two candidates it is exactly zero.
Several sets (one per namespace, :func:`rank_sets`) are ranked as their union: one
centroid, one BM25, one pool. Held out (bench/recall_locomo.py: weights chosen on five conversations,
scored on the other five, both ways), the two terms above give 0.807 recall@5.

Query dates: a question that names a calendar date ("on 16 June, 2023", "in October
2023", see :mod:`memlife.timeref`) is about what was said then, and a memory is saved
when it is said. Records created inside the named period, or up to DATE_GRACE_DAYS
after it (events are told after they happen), get ``+ DATE_WEIGHT``. 14% of the LoCoMo
questions name a date; held-out recall@5 0.807 -> 0.829.

Conversation context: facts saved in one conversation share a topic that a single fact
may not spell out ("the painting" three turns after "Caroline's art show"). Among the
best CONTEXT_POOL candidates, each adds ``CONTEXT_WEIGHT x`` the best score of another
candidate created within CONTEXT_WINDOW_S of it (its own score when it has none, so being
alone is neither bonus nor penalty). Held-out recall@5 0.829 -> 0.833 on observations
(recall@10 0.889 -> 0.893, recall@1 0.576 -> 0.562).

Defaults: the weights are the ones coordinate ascent picks on BOTH granularities of the
LoCoMo bench at once (short observations and raw chatty turns, mean recall@5): memories
are not always short facts, and on turns lexical evidence, context, token alignment and
speakers matter more (``--granularity both``). Chosen that way on five conversations,
they score 0.844 (observations) and 0.777 (turns) held out, against 0.845 and 0.786 for
weights chosen on each granularity alone; on all ten conversations the shipped weights
score 0.843 and 0.788 (before the speaker term: 0.841 and 0.779; before token alignment:
0.826 and 0.708).

Token alignment (:mod:`memlife.token_match`): among the same best CONTEXT_POOL candidates,
each adds ``TOKEN_WEIGHT x`` how well the question's words match its tokens. Held out
(weights chosen on both granularities): recall@5 on raw turns 0.700 -> 0.771, on
observations 0.824 -> 0.838. A RankSet without ``token_codes`` ranks without the term.

Speakers (:mod:`memlife.speakers`): a memory kept as a conversation turn ("Caroline: I
went to the support group") says "I" where the question says "Caroline". Each candidate
adds ``SPEAKER_WEIGHT x`` the share of the names the question gives that speak in it (a
line opening "Name:"). Held out (weights chosen on both granularities): recall@5 on raw
turns 0.762 -> 0.777 (paired +0.015, 95% interval +0.003 to +0.027), observations 0.842
-> 0.844 (they have no speaker lines; the other weights moved). The index that serves BM25
keeps each row's speakers.

The threshold applies to the cosine similarity, not the fused score: it is the
calibrated "is this about the query at all" signal, and a lexical bonus must not
let an unrelated record that shares one word through.

Callers that recall repeatedly over the same records (one actor's memories) should
build a :class:`LexicalIndex` once and pass it in; building one is O(total tokens),
a query against it is O(postings of the query's terms).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from memlife.coarse import COARSE_MIN_ROWS, SignCodes, rerank_coarse
from memlife.embed import Embedder, default_embedder
from memlife.lexical import LexicalIndex, corpus_of
from memlife.speakers import query_names
from memlife.timeref import day_start, query_date_ranges
from memlife.token_match import QueryTokens, TokenCodes, alignment

DEFAULT_THRESHOLD = 0.25  # MiniLM cosine below which a memory is "not about the query"
# Weights chosen on LoCoMo observations AND raw turns together (module doc, "Defaults").
LEXICAL_WEIGHT = 0.3  # weight of max-normalised BM25 next to the cosine
CENTROID_WEIGHT = 0.75  # a: how far the query is moved away from the candidates' mean
DATE_WEIGHT = 0.5  # bonus for a record created in a period the query names
DATE_GRACE_DAYS = 7  # ... or up to this many days after it (events are told after they happen)
CONTEXT_WEIGHT = 0.4  # share of the best same-conversation neighbour's score
CONTEXT_WINDOW_S = 1800.0  # records created this close together count as one conversation
CONTEXT_POOL = 50  # the context and token terms reorder this many best candidates
TOKEN_WEIGHT = 5.0  # weight of token alignment (memlife.token_match) over the pool
SPEAKER_WEIGHT = 0.3  # bonus for being said by whom the query names (memlife.speakers)
_DAY_S = 86400.0


@dataclass(frozen=True)
class Hits:
    """Top-k result, best first. ``indices`` index the candidate matrix/texts."""

    indices: np.ndarray  # int64 (m,), m <= k
    scores: np.ndarray  # float32 (m,): the fused ranking score
    similarities: np.ndarray  # float32 (m,): cosine similarity, what the threshold tests

    def __len__(self) -> int:
        return len(self.indices)


def _as_matrix(vectors: np.ndarray) -> np.ndarray:
    if vectors.ndim != 2:
        raise ValueError(f"candidate vectors must be 2-D, got shape {vectors.shape}")
    # Only copies when the caller did not already hand over contiguous float32.
    return np.ascontiguousarray(vectors, dtype=np.float32)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best scores, best first; ties broken by lower index (stable)."""
    n = len(scores)
    if k >= n:
        cand = np.arange(n)
    else:
        kth = np.partition(scores, n - k)[n - k]
        cand = np.flatnonzero(scores >= kth)  # includes every tie at the boundary
    order = np.lexsort((cand, -scores[cand]))
    return cand[order][:k]


def _date_bonus(query_text: str, created: np.ndarray) -> np.ndarray | None:
    """1.0 where a record was created in a period the query names (or DATE_GRACE_DAYS after)."""
    ranges = query_date_ranges(query_text)
    if not ranges:
        return None
    inside = np.zeros(len(created), dtype=bool)
    for lo, hi in ranges:
        end = day_start(hi) + (1 + DATE_GRACE_DAYS) * _DAY_S
        inside |= (created >= day_start(lo)) & (created < end)
    return inside.astype(np.float32)


def _context_scores(scores: np.ndarray, created: np.ndarray, weight: float) -> np.ndarray:
    """``scores`` plus ``weight`` x the best score among each one's conversation neighbours.

    Neighbours are the other entries created within CONTEXT_WINDOW_S; an entry without one
    counts its own score, so being alone is neither a bonus nor a penalty.
    """
    near = np.abs(created[:, None] - created[None, :]) <= CONTEXT_WINDOW_S
    np.fill_diagonal(near, False)
    nb = np.where(near, scores[None, :], np.float32(-np.inf)).max(axis=1)
    nb = np.where(np.isfinite(nb), nb, scores)
    return scores + np.float32(weight) * nb


def rank(
    query_vector: np.ndarray,
    vectors: np.ndarray,
    *,
    k: int = 5,
    threshold: float | None = None,
    query_text: str | None = None,
    texts: Sequence[str] | None = None,
    lexical: LexicalIndex | None = None,
    lexical_weight: float = LEXICAL_WEIGHT,
    speaker_weight: float = SPEAKER_WEIGHT,
    centroid: np.ndarray | None = None,
    centroid_weight: float = CENTROID_WEIGHT,
    created: np.ndarray | None = None,
    date_weight: float = DATE_WEIGHT,
    context_weight: float = CONTEXT_WEIGHT,
    coarse: SignCodes | None = None,
    query_tokens: QueryTokens | None = None,
    token_codes: Callable[[np.ndarray], Sequence[TokenCodes | None]] | None = None,
    token_weight: float = TOKEN_WEIGHT,
) -> Hits:
    """Rank candidates for one query.

    ``vectors`` (n, dim) and ``query_vector`` (dim,) are L2-normalised embeddings.
    Hybrid ranking is used when ``query_text`` is given together with ``lexical`` (a
    prebuilt index over the same n candidates, in the same order) or ``texts`` (an
    index is built on the fly: fine for small sets). Otherwise ranking is dense only.
    The same index gives the speaker term: ``speaker_weight`` x the share of the names
    the query gives that speak in a candidate (module doc).
    The dense term is centroid-corrected (module doc); ``centroid`` is the mean of
    ``vectors`` (computed when None; callers that keep a running sum pass it in), and
    ``centroid_weight=0`` gives the plain cosine. ``created`` (float64 POSIX seconds,
    one per candidate) turns on the two time terms: the date bonus for periods the query
    names and the conversation-context term (module doc); a weight of 0 turns either off.
    Candidates whose cosine is below ``threshold`` are never returned. ``coarse`` (sign
    codes of the same rows, :mod:`memlife.coarse`) lets a set of COARSE_MIN_ROWS or more
    score exactly only the rows a cheap estimate ranks best. ``query_tokens`` (the
    question's token states) and ``token_codes`` (row indices -> those rows' token codes)
    turn on token alignment over the best CONTEXT_POOL candidates (module doc).
    """
    if k <= 0:
        raise ValueError("k must be positive")
    mat = _as_matrix(vectors)
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    if mat.shape[0] and mat.shape[1] != q.shape[0]:
        raise ValueError(f"query dim {q.shape[0]} != candidate dim {mat.shape[1]}")
    if created is not None:
        created = np.asarray(created, dtype=np.float64).reshape(-1)
        if len(created) != mat.shape[0]:
            raise ValueError(f"{len(created)} creation times for {mat.shape[0]} vectors")
    n = mat.shape[0]
    w, const = q, None
    if centroid_weight and n:
        mu = mat.mean(axis=0) if centroid is None else np.asarray(centroid, np.float32)
        if mu.shape != q.shape:
            raise ValueError(f"centroid shape {mu.shape} != query shape {q.shape}")
        # cos - a*(v.mu - mu.mu) = v.(q - a*mu) + a*mu.mu: ONE matrix-vector product, the
        # whole cost of a query at 100k rows (a two-column product costs 2-2.5x as much).
        a = np.float32(centroid_weight)
        w, const = q - a * mu, a * np.float32(mu @ mu)
    # The lexical, date and speaker terms, added to the dense term in this order (exact).
    terms: list[np.ndarray] = []
    names = query_names(query_text) if query_text is not None and speaker_weight else None
    named = names is not None and bool(names.sure or names.common)
    if query_text is None or not (lexical_weight or named):
        lexical = None  # no term reads it (a query naming nobody builds no index for it)
    elif lexical is None and texts is not None:
        lexical = LexicalIndex(texts)
    if lexical is not None and len(lexical) != n:
        raise ValueError(f"lexical index has {len(lexical)} texts, {n} vectors")
    if query_text is not None and lexical is not None and lexical_weight:
        bm = lexical.scores(query_text)
        top_bm = float(bm.max()) if len(bm) else 0.0
        if top_bm > 0:
            terms.append(np.float32(lexical_weight / top_bm) * bm)
    if created is not None and query_text is not None and date_weight and len(created):
        bonus = _date_bonus(query_text, created)
        if bonus is not None:
            terms.append(np.float32(date_weight) * bonus)
    if lexical is not None and names is not None and named:
        share = lexical.speaker_share(names.sure, names.common)
        terms.append(np.float32(speaker_weight) * share)
    context = created is not None and bool(context_weight) and n > 1
    tokens = query_tokens is not None and token_codes is not None and bool(token_weight)
    m = max(CONTEXT_POOL, k) if context or tokens else k
    pool, pool_sims, pool_fused = _pool(mat, q, w, const, terms, m, threshold, coarse)
    if tokens and len(pool) and query_tokens is not None and token_codes is not None:
        match = alignment(query_tokens, token_codes(pool))
        pool_fused = pool_fused + np.float32(token_weight) * match
    if context and created is not None and len(pool):  # (context implies created)
        # Only the best CONTEXT_POOL candidates are reordered: a small pool-by-pool step.
        pool_fused = _context_scores(pool_fused, created[pool], context_weight)
    if tokens or context:
        order = np.lexsort((pool, -pool_fused))[:k]  # ties: lower index first, as _top
        return Hits(indices=pool[order], scores=pool_fused[order], similarities=pool_sims[order])
    return Hits(indices=pool[:k], scores=pool_fused[:k], similarities=pool_sims[:k])


def _pool(
    mat: np.ndarray,
    q: np.ndarray,
    w: np.ndarray,
    const: np.float32 | None,
    terms: list[np.ndarray],
    m: int,
    threshold: float | None,
    coarse: SignCodes | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``m`` best eligible rows by the fused score ``mat @ w + const + terms``, best
    first: (rows, cosines, fused scores). ``coarse`` codes let a large set score exactly
    only the rows a cheap estimate ranks best."""
    n = mat.shape[0]
    if coarse is not None and n >= COARSE_MIN_ROWS and len(coarse) == n:
        best = rerank_coarse(coarse, mat, q, w, const, terms, m, threshold, _best_eligible)
        if best is not None:
            return best
    fused = mat @ w  # the exact product over every row
    sims = fused if const is None else None
    if const is not None:
        fused = fused + const
    for term in terms:
        fused = fused + term
    pool, pool_sims = _best_eligible(fused, m, mat, q, sims, threshold)
    return pool, pool_sims, fused[pool]


def _best_eligible(
    fused: np.ndarray,
    m: int,
    mat: np.ndarray,
    q: np.ndarray,
    sims: np.ndarray | None,
    threshold: float | None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``m`` best rows by ``fused`` whose cosine passes ``threshold``, and their cosines.

    Exactly ``_top`` of ``fused`` with below-threshold rows removed, but the cosine is only
    computed for the best rows, widening the look until ``m`` pass (or every row was seen):
    a full second product over the matrix would double the cost of a query.
    """
    n = len(fused)
    take = m
    while True:
        cand = _top(fused, min(take, n)).astype(np.int64)
        cos = sims[cand] if sims is not None else mat[cand] @ q
        if threshold is not None:
            ok = cos >= threshold
            cand, cos = cand[ok], cos[ok]
        if len(cand) >= m or take >= n:
            return cand[:m], cos[:m].astype(np.float32)
        take *= 8
        if take * 4 >= n and sims is None:
            sims = mat @ q  # most rows fail the threshold: one full product is cheaper


def search(
    query: str,
    vectors: np.ndarray,
    *,
    k: int = 5,
    threshold: float | None = None,
    texts: Sequence[str] | None = None,
    lexical: LexicalIndex | None = None,
    lexical_weight: float = LEXICAL_WEIGHT,
    speaker_weight: float = SPEAKER_WEIGHT,
    centroid_weight: float = CENTROID_WEIGHT,
    created: np.ndarray | None = None,
    embedder: Embedder | None = None,
) -> Hits:
    """Embed ``query`` (default: the bundled MiniLM) and :func:`rank` the candidates."""
    qv = (embedder or default_embedder()).embed([query])[0]
    return rank(
        qv,
        vectors,
        k=k,
        threshold=threshold,
        query_text=query,
        texts=texts,
        lexical=lexical,
        lexical_weight=lexical_weight,
        speaker_weight=speaker_weight,
        centroid_weight=centroid_weight,
        created=created,
    )


class RankSet(Protocol):
    """One namespace's candidates, row-aligned: an online shard index or the gate's view."""

    @property
    def ids(self) -> Sequence[str]: ...

    @property
    def vectors(self) -> np.ndarray: ...

    @property
    def lexical(self) -> LexicalIndex: ...

    @property
    def created(self) -> np.ndarray: ...

    @property
    def centroid(self) -> np.ndarray | None: ...


def _codes_of(s: RankSet) -> Callable[[np.ndarray], Sequence[TokenCodes | None]] | None:
    """A set's token codes by row, when it keeps them (online shards: ``token_codes``)."""
    get = getattr(s, "token_codes", None)
    return get if callable(get) else None


@dataclass(frozen=True)
class Ranked:
    """One candidate of :func:`rank_sets`: its fused score and cosine, id, set and row."""

    score: float
    similarity: float
    id: str
    which: int  # position of its set in the input
    row: int


def _coarse_of(s: RankSet) -> SignCodes | None:
    """A set's sign codes when it keeps them (online shards: ``ShardIndex.coarse``)."""
    get = getattr(s, "coarse", None)
    return get() if callable(get) else None


def rank_sets(
    query_vector: np.ndarray,
    query_text: str,
    sets: Sequence[RankSet],
    *,
    k: int,
    threshold: float = DEFAULT_THRESHOLD,
    query_tokens: QueryTokens | None = None,
) -> list[Ranked]:
    """Recall's ranking, shared by online recall and the gate's shadow recall: :func:`rank`
    over the union of the sets (one per namespace), without copying them into one. The
    terms that depend on the whole set are taken over the union: the centroid, BM25's
    statistics and its max-normalisation, the names that speak, and the best
    CONTEXT_POOL candidates that token alignment and the conversation context reorder
    (a neighbour in another namespace counts). Each set scores its own rows; the best
    pool of every set holds the union's best pool. Returns the best ``k`` (ties by id);
    the caller cuts after its own checks (online recall drops hits no longer active).
    Scores agree with :func:`rank`'s to float32 rounding: BLAS may sum a row in another
    order in another matrix, so one memory kept in two sets may score a last bit apart,
    and such a pair is ordered by that bit, not by id."""
    if k <= 0:
        raise ValueError("k must be positive")
    live = [(which, s) for which, s in enumerate(sets) if len(s.ids)]
    if not live:
        return []
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    mats = [_as_matrix(s.vectors) for _, s in live]
    if any(mat.shape[1] != q.shape[0] for mat in mats):
        raise ValueError(f"query dim {q.shape[0]} != a set's candidate dim")
    sizes = np.array([len(m) for m in mats], dtype=np.float64)
    means = [np.asarray(s.centroid if s.centroid is not None else m.mean(axis=0), np.float64)
             for (_, s), m in zip(live, mats, strict=True)]  # fmt: skip
    mu = np.sum([n * c for n, c in zip(sizes, means, strict=True)], axis=0) / sizes.sum()
    a = np.float32(CENTROID_WEIGHT)
    mu32 = mu.astype(np.float32)
    w, const = q - a * mu32, a * np.float32(mu32 @ mu32)
    lexicals = [s.lexical for _, s in live]
    # one set: its own statistics, whose term weights it keeps between queries
    stats = corpus_of(lexicals, query_text) if len(lexicals) > 1 else None
    bms = [lx.scores(query_text, stats) for lx in lexicals]
    top_bm = max(float(b.max()) for b in bms)
    names = query_names(query_text)
    speaking = set(names.sure).union(*(lx.speaking(names.common) for lx in lexicals))
    context = sum(len(m) for m in mats) > 1
    tokens = query_tokens is not None and any(_codes_of(s) is not None for _, s in live)
    m = max(CONTEXT_POOL, k)
    created = [np.asarray(s.created, dtype=np.float64).reshape(-1) for _, s in live]
    found: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []  # (set, rows, cos, fused)
    for i, ((_, s), mat, bm) in enumerate(zip(live, mats, bms, strict=True)):
        terms: list[np.ndarray] = []
        if top_bm > 0:
            terms.append(np.float32(LEXICAL_WEIGHT / top_bm) * bm)
        bonus = _date_bonus(query_text, created[i]) if len(created[i]) else None
        if bonus is not None:
            terms.append(np.float32(DATE_WEIGHT) * bonus)
        if speaking:
            terms.append(np.float32(SPEAKER_WEIGHT) * s.lexical.speaker_share(speaking))
        rows, cos, fused = _pool(mat, q, w, const, terms, m, threshold, _coarse_of(s))
        found.append((i, rows, cos, fused))
    which = np.concatenate([np.full(len(r), i) for i, r, _, _ in found])
    rows = np.concatenate([r for _, r, _, _ in found]).astype(np.int64)
    sims = np.concatenate([c for _, _, c, _ in found])
    fused = np.concatenate([f for _, _, _, f in found])
    pick = np.lexsort((rows, which, -fused))[:m]  # the union's pool; ties as rank's
    which, rows, sims, fused = which[pick], rows[pick], sims[pick], fused[pick]
    if tokens and query_tokens is not None and len(rows):
        codes: list[TokenCodes | None] = [None] * len(rows)
        for i, (_, s) in enumerate(live):
            get, at = _codes_of(s), np.flatnonzero(which == i)
            if get is not None and len(at):
                for j, c in zip(at, get(rows[at]), strict=True):
                    codes[int(j)] = c
        fused = fused + np.float32(TOKEN_WEIGHT) * alignment(query_tokens, codes)
    if context and len(rows):
        when = np.array([created[int(i)][r] for i, r in zip(which, rows, strict=True)])
        fused = _context_scores(fused, when, CONTEXT_WEIGHT)
    out = [
        Ranked(float(sc), float(sim), live[int(i)][1].ids[int(r)], live[int(i)][0], int(r))
        for i, r, sc, sim in zip(which, rows, fused, sims, strict=True)
    ]
    out.sort(key=lambda r: (-r.score, r.id))
    return out[:k]

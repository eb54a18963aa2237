"""A vectorised replica of ``memlife.retrieval.rank`` for LoCoMo's held-out figures.

Every query of a conversation is ranked in one pass (about 5 s per held-out figure
instead of about 2 minutes through ``rank``), so that weight grids and ideas can be
searched. ``check_replica`` holds it to ``rank`` on every query before any figure is
trusted (tests/e2e/test_bench_recall.py does the same on random conversations).
``held_out`` is the headline procedure: weights chosen on conversations 0-4, scored on
5-9, then the reverse.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import recall_locomo as bench

from memlife import retrieval, token_match
from memlife.lexical import LexicalIndex
from memlife.retrieval import CONTEXT_POOL, CONTEXT_WINDOW_S
from memlife.speakers import query_names
from memlife.timeref import query_date_ranges
from memlife.token_match import QueryTokens, TokenCodes

if TYPE_CHECKING:
    from locomo_cache import VectorCache


@dataclass
class Prepared:
    """One conversation, every query at once: Q x N matrices of the fused terms."""

    conv: bench.Conversation
    cos: np.ndarray
    cent: np.ndarray
    bm25: np.ndarray
    date: np.ndarray
    speaker: np.ndarray  # Q x N: share of the names the query gives that speak in the memory
    near: np.ndarray  # N x N: created within CONTEXT_WINDOW_S of each other
    relevant: np.ndarray  # Q x N
    category: np.ndarray
    lexical: LexicalIndex
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # idea -> Q x N term
    # token alignment: per query and content token, its best match in every memory (Q, T, N),
    # whether the memory holds that piece (Q, T, N), and which of the T slots are real (Q, T)
    tok_best: np.ndarray | None = None
    tok_held: np.ndarray | None = None
    tok_mask: np.ndarray | None = None


def prepare(
    c: bench.Conversation,
    index_texts: Sequence[str] | None = None,
    dates: Callable[[str, np.ndarray], list[tuple[date, date]]] | None = None,
) -> Prepared:
    """The shipped terms for every query (``index_texts``: BM25 over other texts;
    ``dates``: another reading of the query's dates)."""
    vecs, qvecs = c.vecs, c.qvecs
    mu = vecs.mean(axis=0)
    lexical = LexicalIndex(index_texts if index_texts is not None else c.texts)
    bm = np.stack([lexical.scores(q["question"]) for q in c.queries])
    top = bm.max(axis=1, keepdims=True)
    dated = []
    for q in c.queries:
        ranges = dates(q["question"], c.created) if dates else query_date_ranges(q["question"])
        inside = np.zeros(len(c.created), bool)
        for lo, hi in ranges:
            end = retrieval.day_start(hi) + (1 + retrieval.DATE_GRACE_DAYS) * 86400.0
            inside |= (c.created >= retrieval.day_start(lo)) & (c.created < end)
        dated.append(inside.astype(np.float32))
    near = np.abs(c.created[:, None] - c.created[None, :]) <= CONTEXT_WINDOW_S
    np.fill_diagonal(near, False)
    tok_best = tok_held = tok_mask = None
    if c.codes and c.qtokens:
        tok_best, tok_held, tok_mask = token_tables(c.codes, c.qtokens)
    return Prepared(
        conv=c,
        cos=qvecs @ vecs.T,
        cent=-(vecs @ mu - mu @ mu)[None, :],
        bm25=np.where(top > 0, bm / np.where(top > 0, top, 1), 0).astype(np.float32),
        date=np.stack(dated),
        speaker=np.stack([lexical.speaker_share(*query_names(q["question"])) for q in c.queries]),
        near=near,
        relevant=np.stack(c.relevant),
        category=np.array([q["category"] for q in c.queries]),
        lexical=lexical,
        tok_best=tok_best,
        tok_held=tok_held,
        tok_mask=tok_mask,
    )


def token_tables(
    codes: Sequence[TokenCodes], queries: Sequence[QueryTokens]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """token_match.alignment's inputs for every query and memory at once (Prepared)."""
    dim = queries[0].states.shape[1] if queries else 384
    bits = np.concatenate([c.bits for c in codes])
    starts = np.concatenate([[0], np.cumsum([len(c) for c in codes])[:-1]])
    width = max([len(q) for q in queries] + [1])
    best = np.zeros((len(queries), width, len(codes)), np.float32)
    held = np.zeros((len(queries), width, len(codes)), bool)
    mask = np.zeros((len(queries), width), bool)
    for i, q in enumerate(queries):
        if not len(q):
            continue
        scaled = token_match.scaled_states(q)
        best[i, : len(q)] = np.maximum.reduceat(
            token_match.sign_dots(scaled, bits, dim), starts, axis=1
        )
        held[i, : len(q)] = np.stack([np.isin(q.pieces, c.pieces) for c in codes], axis=1)
        mask[i, : len(q)] = True
    return best, held, mask


def token_term(p: Prepared, idx: np.ndarray) -> np.ndarray:
    """token_match.alignment over each query's pool ``idx`` (Q, P): idf over the pool."""
    assert p.tok_best is not None and p.tok_held is not None and p.tok_mask is not None
    best = np.take_along_axis(p.tok_best, idx[:, None, :], 2)
    df = np.take_along_axis(p.tok_held, idx[:, None, :], 2).sum(axis=2)
    n = idx.shape[1]
    idf = (np.log((n + 1) / (df + 1)) + 1.0) * p.tok_mask
    denom = idf.sum(axis=1)
    score = np.einsum("qt,qtp->qp", idf, best) / np.where(denom > 0, denom, 1.0)[:, None]
    return score.astype(np.float32)


Post = Callable[[Prepared, np.ndarray, dict], np.ndarray]


def fused(p: Prepared, w: dict[str, float], post: Post | None = None) -> np.ndarray:
    f = p.cos + w["centroid"] * p.cent + w["lexical"] * p.bm25 + w["date"] * p.date
    if w.get("speaker"):
        f = f + w["speaker"] * p.speaker
    for name, term in p.extra.items():
        if w.get(name):
            f = f + w[name] * term
    f = f.astype(np.float32)
    return post(p, f, w) if post is not None else f


def first_hits(
    p: Prepared, w: dict[str, float], post: Post | None = None, pool: int = CONTEXT_POOL
) -> np.ndarray:
    """Per query: 1-based rank of the first relevant memory in the top 10 (0 = none)."""
    f = fused(p, w, post)
    pool = min(pool, f.shape[1])
    idx = np.argsort(-f, axis=1, kind="stable")[:, :pool]  # ties: lower index, as rank
    s = np.take_along_axis(f, idx, 1)
    if w.get("token") and p.tok_best is not None:
        s = s + np.float32(w["token"]) * token_term(p, idx)
    if w["context"] and f.shape[1] > 1:
        near = p.near[idx[:, :, None], idx[:, None, :]]
        nb = np.where(near, s[:, None, :], -np.inf).max(axis=2)
        s = s + np.float32(w["context"]) * np.where(np.isfinite(nb), nb, s)
    if w.get("diversity"):
        top = _session_diverse(p, idx, s, w["diversity"])
    else:
        top = np.take_along_axis(idx, np.argsort(-s, axis=1, kind="stable")[:, :10], 1)
    rel = np.take_along_axis(p.relevant, top, 1)
    return np.where(rel.any(axis=1), rel.argmax(axis=1) + 1, 0)


def _session_diverse(p: Prepared, idx: np.ndarray, s: np.ndarray, penalty: float) -> np.ndarray:
    """Greedy top 10 where each pick costs ``penalty`` to the rest of its session (evidence
    of a multi-hop question sits in different sessions)."""
    out = np.empty((len(idx), 10), np.int64)
    for qi in range(len(idx)):
        left = s[qi].astype(np.float64)
        session = p.conv.created[idx[qi]]
        for r in range(10):
            j = int(np.argmax(left))
            out[qi, r] = idx[qi, j]
            left[j] = -np.inf
            left[session == session[j]] -= penalty
    return out


def check_replica(preps: Sequence[Prepared], w: dict[str, float]) -> float:
    """Share of queries whose first hit the replica and ``rank`` put at the same place."""
    same = total = 0
    for p in preps:
        got, want = first_hits(p, w), bench.first_hits(p.conv, w)
        same += int((got == np.asarray(want)).sum())
        total += len(want)
    return same / total


def checked(convs: list[bench.Conversation], cache: VectorCache) -> list[Prepared] | None:
    """Every conversation embedded (through ``cache``) and prepared, once the replica has
    agreed with ``rank`` on every query (printed); None, with a message, where it has not."""
    bench.prepare(convs, cache)
    preps = [prepare(c) for c in convs]
    agree = check_replica(preps, bench.DEFAULTS)
    print(f"replica agrees with retrieval.rank on {agree:.4f} of queries")
    if agree < 0.999:
        print("replica disagrees with rank(): stopping", file=sys.stderr)
        return None
    return preps


def observations_from_argv(
    argv: list[str] | None, doc: str
) -> tuple[VectorCache, list[Prepared]] | None:
    """A script's command line, ``path [--embed-cache FILE]``: the observation task
    embedded, prepared and :func:`checked` (None where the replica disagrees)."""
    from locomo_cache import VectorCache

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--embed-cache", type=Path)
    args = ap.parse_args(argv)
    cache = VectorCache(args.embed_cache)
    preps = checked(bench.load(args.path, "observations"), cache)
    return None if preps is None else (cache, preps)


def held_out_with(
    preps: Sequence[Prepared],
    grid: dict,
    name: str,
    make: Callable[[int, bench.Conversation], np.ndarray],
    weights: Sequence[float],
) -> dict:
    """``held_out`` with one more fused term: ``make(i, conversation)`` (Q x N) for each
    conversation, its weight chosen from ``weights`` (0 = off) like the others."""
    for i, p in enumerate(preps):
        p.extra = {name: make(i, p.conv)}
    try:
        return held_out(preps, grid | {name: tuple(weights)})
    finally:
        for p in preps:
            p.extra = {}


def _score(preps: Sequence[Prepared], w: dict, post: Post | None, pool: int) -> dict:
    """Hits per k and category, and every query's first-hit rank in order (bench/recall_bootstrap.py)."""
    return scored(preps, [first_hits(p, w, post, pool) for p in preps])


def scored(preps: Sequence[Prepared], ranks: Sequence[np.ndarray]) -> dict:
    """``_score`` of first-hit ranks already found, one array per conversation."""
    hits = {k: Counter() for k in bench.KS}
    total: Counter = Counter()
    for p, got in zip(preps, ranks, strict=True):
        for cat, r in zip(p.category, got, strict=True):
            total[cat] += 1
            for k in bench.KS:
                hits[k][cat] += bool(0 < r <= k)
    return {"hits": hits, "total": total, "ranks": np.concatenate(ranks)}


def _recall5(preps: Sequence[Prepared], w: dict, post: Post | None, pool: int) -> float:
    s = _score(preps, w, post, pool)
    return sum(s["hits"][5].values()) / max(sum(s["total"].values()), 1)


def choose(preps: Sequence[Prepared], grid: dict, post: Post | None, pool: int) -> dict:
    """bench.choose's coordinate ascent (same start, order, ties, at most 4 sweeps)."""
    start = {name: values[0] for name, values in grid.items()}
    return bench.ascend(lambda w: _recall5(preps, w, post, pool), grid, list(grid), start)


def tally(tests: Sequence[dict]) -> dict:
    """Held-out figures from each fold's test score (``_score``): the mean over the folds
    per k, and the table of their queries pooled."""
    pooled = {"hits": {k: Counter() for k in bench.KS}, "total": Counter()}
    means: dict[int, list[float]] = {k: [] for k in bench.KS}
    for s in tests:
        n = sum(s["total"].values())
        for k in bench.KS:
            means[k].append(sum(s["hits"][k].values()) / n)
            pooled["hits"][k].update(s["hits"][k])
        pooled["total"].update(s["total"])
    return {
        "mean": {k: float(np.mean(v)) for k, v in means.items()},
        "pooled": bench.summarise(pooled),
        "ranks": [s["ranks"] for s in tests],  # per test fold, for bench/recall_bootstrap.py
    }


def held_out(
    preps: Sequence[Prepared], grid: dict, post: Post | None = None, pool: int = CONTEXT_POOL
) -> dict:
    weights, tests = [], []
    for train, test in bench.FOLDS:
        w = choose([preps[i] for i in train], grid, post, pool)
        weights.append({k: v for k, v in w.items() if k not in bench.GRID and v} or "0")
        tests.append(_score([preps[i] for i in test], w, post, pool))
    return tally(tests) | {"idea_weights": weights}

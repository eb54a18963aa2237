"""Four more ranking terms for LoCoMo recall, each held out (issue 19, 22nd round).

Each term gets its own weight grid (0 = off), fixed before the run, and is judged like
bench/recall_locomo.py's headline: every weight chosen on conversations 0-4 by coordinate
ascent on recall@5 and scored on 5-9, then the reverse; the mean of the two held-out
scores, compared question by question with the headline (``recall_bootstrap.paired``).

- **semantic neighbours**: the context term finds a candidate's neighbours by time (its
  session); this one by meaning. Among the best 50, each candidate adds a share of the best
  score of another candidate whose memory vector is within cosine ``tau`` of its own
  (tau 0.5 and 0.7, both fixed beforehand).
- **token term on the pool's own scale**: token alignment's score, z-scored over the
  query's pool of 50, so that its weight adapts to how far the pool's scores spread for
  this question (added beside the shipped term; and in its place).
- **query likelihood**: a Dirichlet-smoothed language-model score (mu = the mean memory
  length) beside BM25, scaled to [0, 1] per query.
- **coverage**: the idf-weighted share of the question's terms a memory holds.

    uv run python bench/recall_pool_terms.py ../shared/data/locomo10.json [--embed-cache FILE]
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable

import locomo_replica as replica
import numpy as np
import recall_bootstrap as bootstrap
import recall_locomo as bench
from locomo_replica import Prepared, held_out, held_out_with

from memlife.lexical import tokenize
from memlife.retrieval import CONTEXT_POOL

PoolTerm = Callable[[Prepared, np.ndarray, np.ndarray], np.ndarray]


def first_hits_with(extra: dict[str, PoolTerm]) -> Callable[..., np.ndarray]:
    """replica.first_hits with ``extra`` terms added over the pool, after the token term
    and from the same scores the context term reads."""

    def first_hits(
        p: Prepared, w: dict[str, float], post: object = None, pool: int = CONTEXT_POOL
    ) -> np.ndarray:
        f = replica.fused(p, w)
        pool = min(pool, f.shape[1])
        idx = np.argsort(-f, axis=1, kind="stable")[:, :pool]
        s = np.take_along_axis(f, idx, 1)
        if p.tok_best is not None:
            tok = replica.token_term(p, idx)
            if w.get("token"):
                s = s + np.float32(w["token"]) * tok
        base = s
        for name, term in extra.items():
            if w.get(name):
                s = s + np.float32(w[name]) * term(p, idx, base)
        if w["context"] and f.shape[1] > 1:
            near = p.near[idx[:, :, None], idx[:, None, :]]
            nb = np.where(near, base[:, None, :], -np.inf).max(axis=2)
            s = s + np.float32(w["context"]) * np.where(np.isfinite(nb), nb, base)
        top = np.take_along_axis(idx, np.argsort(-s, axis=1, kind="stable")[:, :10], 1)
        rel = np.take_along_axis(p.relevant, top, 1)
        return np.where(rel.any(axis=1), rel.argmax(axis=1) + 1, 0)

    return first_hits


def semantic_neighbours(tau: float) -> PoolTerm:
    def term(p: Prepared, idx: np.ndarray, s: np.ndarray) -> np.ndarray:
        v = p.conv.vecs[idx]  # Q x P x D
        sims = np.einsum("qid,qjd->qij", v, v)
        near = sims >= tau
        for i in range(near.shape[1]):
            near[:, i, i] = False
        nb = np.where(near, s[:, None, :], -np.inf).max(axis=2)
        return np.where(np.isfinite(nb), nb, s).astype(np.float32)

    return term


def z_token(p: Prepared, idx: np.ndarray, s: np.ndarray) -> np.ndarray:
    t = replica.token_term(p, idx)
    sd = t.std(axis=1, keepdims=True)
    return ((t - t.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1)).astype(np.float32)


def query_likelihood(c: bench.Conversation) -> np.ndarray:
    """Q x N Dirichlet-smoothed log likelihood (mu = mean length), min-max per query."""
    docs = [Counter(tokenize(t)) for t in c.texts]
    lengths = np.array([sum(d.values()) for d in docs], np.float64)
    total = Counter()
    for d in docs:
        total.update(d)
    size = float(sum(total.values())) or 1.0
    mu = float(lengths.mean()) or 1.0
    out = np.zeros((len(c.queries), len(docs)), np.float32)
    for qi, q in enumerate(c.queries):
        terms = [t for t in dict.fromkeys(tokenize(q["question"])) if t in total]
        if not terms:
            continue
        score = len(terms) * np.log(mu / (lengths + mu))
        for t in terms:
            tf = np.array([d.get(t, 0) for d in docs], np.float64)
            score += np.log1p(tf / (mu * total[t] / size))
        lo, hi = score.min(), score.max()
        out[qi] = (score - lo) / (hi - lo) if hi > lo else 0.0
    return out


def coverage(c: bench.Conversation) -> np.ndarray:
    """Q x N idf-weighted share of the question's terms each memory holds."""
    docs = [set(tokenize(t)) for t in c.texts]
    df = Counter(t for d in docs for t in d)
    n = len(docs)
    out = np.zeros((len(c.queries), n), np.float32)
    for qi, q in enumerate(c.queries):
        terms = [t for t in dict.fromkeys(tokenize(q["question"])) if t in df]
        idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
        whole = sum(idf.values())
        if whole > 0:
            out[qi] = [sum(idf[t] for t in terms if t in d) / whole for d in docs]
    return out


def main(argv: list[str] | None = None) -> int:
    loaded = replica.observations_from_argv(argv, __doc__ or "")
    if loaded is None:
        return 1
    cache, preps = loaded
    grid = dict(bench.GRID)
    shipped = replica.first_hits

    def pooled(extra: dict[str, PoolTerm], weights: dict[str, tuple]) -> Callable[[], dict]:
        def run() -> dict:
            replica.first_hits = first_hits_with(extra)
            try:
                return held_out(preps, grid | weights)
            finally:
                replica.first_hits = shipped

        return run

    def extra_terms(name: str, make: Callable[[bench.Conversation], np.ndarray]) -> dict:
        return held_out_with(
            preps, grid, name, lambda i, c: make(c), (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)
        )

    near = (0.0, 0.1, 0.2, 0.3, 0.5)
    zt = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
    runs: list[tuple[str, Callable[[], dict]]] = [
        ("shipped terms (headline)", lambda: held_out(preps, grid)),
        ("shipped, through this module's pool stage", pooled({}, {})),
        (
            "semantic neighbours, cosine >= 0.5",
            pooled({"sem": semantic_neighbours(0.5)}, {"sem": near}),
        ),
        (
            "semantic neighbours, cosine >= 0.7",
            pooled({"sem": semantic_neighbours(0.7)}, {"sem": near}),
        ),
        ("token term z-scored over the pool, added", pooled({"ztok": z_token}, {"ztok": zt})),
        (
            "token term z-scored, in place of the shipped one",
            pooled({"ztok": z_token}, {"ztok": zt, "token": (0.0,)}),
        ),
        ("query likelihood (Dirichlet) beside BM25", lambda: extra_terms("ql", query_likelihood)),
        ("coverage of the question's terms (idf)", lambda: extra_terms("cover", coverage)),
    ]

    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=50, weights_label="weights per fold"
    )
    cache.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())

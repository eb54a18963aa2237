"""LoCoMo recall with a learned fusion, held out (issue 19's experiment; not shipped).

Per fold, a linear scorer over the best POOL candidates of the shipped fusion is fitted
on the training conversations and scored on the other five: listwise softmax loss on
"any evidence memory in the pool" (numpy, Adam), features standardised on the training
fold, L2 fixed beforehand. Each row adds a group of features to the five the grid
already weighs. Results and conclusions: BENCHMARKS.md, "LoCoMo recall, held out".

    uv run python bench/recall_learned_fusion.py ../shared/data/locomo10.json \\
        [--granularity turns] [--embed-cache FILE] [--second-vectors FILE]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from locomo_cache import VectorCache
from recall_locomo import (
    CATEGORIES,
    FOLDS,
    GRANULARITIES,
    KS,
    Conversation,
    load,
    load_second,
    prepare,
)

from memlife.lexical import tokenize
from memlife.retrieval import CONTEXT_WINDOW_S, _date_bonus

POOL = 50
L2 = 1e-3
BASE_WEIGHTS = {"centroid": 1.0, "lexical": 0.4, "date": 0.5}  # the shipped fusion
_NAME = re.compile(r"\b[A-Z][a-z]+\b")
_WHEN = re.compile(r"^\s*(when|how long|what year|what month|what date)", re.I)
BASE = ["cos", "cent", "bm25", "date", "context"]
ROWS = {
    "the five fused terms": BASE,
    "+ neighbour cosine and BM25": BASE + ["nb_cos", "nb_bm25"],
    "+ rank positions and gap": BASE + ["rank_fused", "rank_dense", "rank_bm25", "gap"],
    "+ names, coverage, length, neighbours": BASE + ["name", "cover", "length", "nb_count"],
    '+ "when" interactions': BASE + ["when_len", "when_bm25", "when_cos"],
}
ROWS["all"] = list(dict.fromkeys(f for names in ROWS.values() for f in names))
SECOND = ["cos2", "cent2", "nb_cos2"]


def _positions(x: np.ndarray) -> np.ndarray:
    out = np.empty(len(x))
    out[np.argsort(-x, kind="stable")] = np.arange(len(x))
    return out


def features(c: Conversation) -> list[tuple[dict[str, np.ndarray], np.ndarray, int]]:
    """Per query: the pool's feature columns, which pool entries are relevant, category."""
    mu = c.vecs.mean(axis=0)
    cent = c.vecs @ mu - mu @ mu
    cent2 = None
    if c.second is not None:
        mu2 = c.second[0].mean(axis=0)
        cent2 = c.second[0] @ mu2 - mu2 @ mu2
    out = []
    for qi, (q, qv, rel) in enumerate(zip(c.queries, c.qvecs, c.relevant, strict=True)):
        text = q["question"]
        cos = c.vecs @ qv
        dense = cos - BASE_WEIGHTS["centroid"] * cent
        bm = c.lexical.scores(text).astype(np.float64)  # type: ignore[union-attr]
        bm = bm / bm.max() if bm.max() > 0 else bm
        bonus = _date_bonus(text, c.created)
        date = np.zeros(len(cos)) if bonus is None else bonus.astype(np.float64)
        fused = dense + BASE_WEIGHTS["lexical"] * bm + BASE_WEIGHTS["date"] * date
        pool = np.argsort(-fused, kind="stable")[:POOL]
        at = c.created[pool]
        near = np.abs(at[:, None] - at[None, :]) <= CONTEXT_WINDOW_S
        np.fill_diagonal(near, False)

        def neighbour(x: np.ndarray, near: np.ndarray = near) -> np.ndarray:
            nb = np.where(near, x[None, :], -np.inf).max(axis=1)
            return np.where(np.isfinite(nb), nb, x)

        names = set(_NAME.findall(text)) - {"What", "When", "Where", "Who", "How", "Which"}
        terms = set(tokenize(text))
        when = float(bool(_WHEN.search(text)))
        f = {
            "cos": cos[pool],
            "cent": cent[pool],
            "bm25": bm[pool],
            "date": date[pool],
            "context": neighbour(fused[pool]),
            "nb_cos": neighbour(cos[pool]),
            "nb_bm25": neighbour(bm[pool]),
            "gap": fused[pool] - fused[pool].max(),
            "rank_fused": np.log1p(np.arange(len(pool))),
            "rank_dense": np.log1p(_positions(dense)[pool]),
            "rank_bm25": np.log1p(_positions(bm)[pool]),
            "name": np.array([float(any(n in c.texts[i] for n in names)) for i in pool]),
            "cover": np.array(
                [len(terms & set(tokenize(c.texts[i]))) / max(len(terms), 1) for i in pool]
            ),
            "length": np.log1p([len(c.texts[i]) for i in pool]),
            "nb_count": near.sum(axis=1).astype(np.float64),
        }
        f |= {"when_len": when * f["length"], "when_bm25": when * f["bm25"]}
        f["when_cos"] = when * f["cos"]
        if c.second is not None and cent2 is not None:
            cos2 = (c.second[0] @ c.second[1][qi])[pool]
            f |= {"cos2": cos2, "cent2": cent2[pool], "nb_cos2": neighbour(cos2)}
        out.append((f, rel[pool], q["category"]))
    return out


def fit(xs: list[np.ndarray], ys: list[np.ndarray], steps: int = 400) -> tuple:
    """Linear weights maximising log P(a relevant pool entry) under a softmax."""
    keep = [i for i, y in enumerate(ys) if y.any()]
    flat = np.concatenate([xs[i] for i in keep])
    mean, std = flat.mean(axis=0), flat.std(axis=0) + 1e-9
    width, dim = max(len(xs[i]) for i in keep), flat.shape[1]
    x = np.zeros((len(keep), width, dim))
    rel = np.zeros((len(keep), width), bool)
    valid = np.zeros((len(keep), width), bool)
    for row, i in enumerate(keep):
        n = len(xs[i])
        x[row, :n], rel[row, :n], valid[row, :n] = (xs[i] - mean) / std, ys[i], True
    w, m1, m2 = np.zeros(dim), np.zeros(dim), np.zeros(dim)
    for t in range(1, steps + 1):
        s = np.where(valid, x @ w, -np.inf)
        p_all = np.exp(s - s.max(axis=1, keepdims=True))
        p_all /= p_all.sum(axis=1, keepdims=True)
        sr = np.where(rel, s, -np.inf)
        p_rel = np.exp(sr - sr.max(axis=1, keepdims=True))
        p_rel /= p_rel.sum(axis=1, keepdims=True)
        g = ((p_all - p_rel)[:, :, None] * x).sum(axis=1).mean(axis=0) + L2 * w
        m1, m2 = 0.9 * m1 + 0.1 * g, 0.999 * m2 + 0.001 * g * g
        w -= 0.05 * (m1 / (1 - 0.9**t)) / (np.sqrt(m2 / (1 - 0.999**t)) + 1e-8)
    return w, mean, std


def held_out(feats: list[list], names: list[str]) -> tuple[dict, dict]:
    """Mean of the two held-out folds (recall@k) and recall@5 per category, pooled."""
    folds, hits5, total = [], Counter(), Counter()
    for train, test in FOLDS:
        tr = [item for i in train for item in feats[i]]
        w, mean, std = fit(
            [np.stack([f[n] for n in names], 1) for f, _, _ in tr], [y for _, y, _ in tr]
        )
        firsts = []
        for f, y, cat in (item for i in test for item in feats[i]):
            order = np.argsort(
                -(((np.stack([f[n] for n in names], 1) - mean) / std) @ w), kind="stable"
            )
            found = np.flatnonzero(y[order])
            first = int(found[0]) + 1 if len(found) else 0
            firsts.append(first)
            total[cat] += 1
            hits5[cat] += 0 < first <= 5
        folds.append({k: sum(0 < f <= k for f in firsts) / len(firsts) for k in KS})
    mean_k = {k: (folds[0][k] + folds[1][k]) / 2 for k in KS}
    return mean_k, {CATEGORIES[c]: hits5[c] / total[c] for c in sorted(total)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, help="locomo10.json")
    ap.add_argument("--granularity", choices=GRANULARITIES, default="observations")
    ap.add_argument("--embed-cache", type=Path)
    ap.add_argument("--second-vectors", type=Path, help="also the second model's features")
    args = ap.parse_args(argv)
    convs = load(args.path, args.granularity)
    prepare(convs, VectorCache(args.embed_cache))
    rows = dict(ROWS)
    if args.second_vectors is not None:
        load_second(args.second_vectors, convs)
        rows = {f"{k} + second model": v + SECOND for k, v in rows.items()}
    feats = [features(c) for c in convs]
    print(f"{'held out, mean of 2 folds':44s} " + " ".join(f"r@{k:<4d}" for k in KS))
    for label, names in rows.items():
        mean_k, cats = held_out(feats, names)
        line = " ".join(f"{mean_k[k]:.3f}" for k in KS)
        print(f"{label:44s} {line}   r@5 " + ", ".join(f"{c} {v:.3f}" for c, v in cats.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

# ruff: noqa
"""Round 30 shared loader: the observation task embedded (cache under .cache_r30), prepared
and held to ``rank`` (bench/locomo_replica.checked). Run from the repository root."""

import os, sys
import numpy as np
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import recall_locomo as bench
import locomo_replica as rep
from locomo_cache import VectorCache
from memlife.lexical import BM25_B, BM25_K1

DATA = Path(os.environ.get("LOCOMO", "../shared/data/locomo10.json"))
CACHE = Path(os.environ.get("EMBED_CACHE", ".cache_r30/emb.npz"))


def load(granularity="observations"):
    cache = VectorCache(CACHE)
    convs = bench.load(DATA, granularity)
    preps = rep.checked(convs, cache)
    cache.save()
    return cache, convs, preps


def bm25_matrix(docs: list[list[str]], queries: list[list[str]]) -> np.ndarray:
    """Q x N BM25 (Lucene idf), each query's row max-normalised (0 where nothing scores)."""
    vocab: dict[str, int] = {}
    for d in docs:
        for t in d:
            vocab.setdefault(t, len(vocab))
    n = len(docs)
    tf = np.zeros((n, len(vocab)), np.float64)
    for i, d in enumerate(docs):
        for t in d:
            tf[i, vocab[t]] += 1
    length = tf.sum(axis=1)
    avg = length.mean() if n else 1.0
    df = (tf > 0).sum(axis=0)
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / max(avg, 1e-9))
    w = tf * (BM25_K1 + 1) / (tf + norm[:, None]) * idf[None, :]  # N x V
    out = np.zeros((len(queries), n), np.float64)
    for qi, q in enumerate(queries):
        for t in dict.fromkeys(q):  # each term once, as LexicalIndex.scores reads a query
            j = vocab.get(t)
            if j is not None:
                out[qi] += w[:, j]
    top = out.max(axis=1, keepdims=True)
    return np.where(top > 0, out / np.where(top > 0, top, 1), 0).astype(np.float32)

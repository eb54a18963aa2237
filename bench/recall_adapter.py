"""LoCoMo recall with a learned query adapter, held out (issue 19's fourth round; not shipped).

Questions ("When did Caroline go to ...?") and memories ("Caroline went to ...") are
written differently, and MiniLM embeds both the same way. An adapter maps the question's
vector before the cosine: ``q' = normalise(q + q W)``, with ``W`` a full 384 x 384 matrix
or a diagonal. Per fold, ``W`` is fitted on the training conversations' questions only
(softmax over the conversation's memories at temperature TAU, loss on "any evidence
memory", L2 on ``W``, Adam, numpy), then every weight of the fusion is chosen on the
same training conversations and scored on the other five, as the headline is.

Two uses of the adapted cosine: in place of the cosine ("replace"), or as a term with
its own weight beside it, 0 allowed ("add"). The L2 strengths are listed, not chosen:
each row is a held-out figure for one strength, so the best row is an upper bound for
what choosing the strength would give. Results: BENCHMARKS.md, "LoCoMo recall, held out".

    uv run python bench/recall_adapter.py ../shared/data/locomo10.json \\
        [--granularity turns] [--embed-cache FILE]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import recall_ideas as ideas
import recall_locomo as bench
from locomo_cache import VectorCache

TAU = 0.05
STEPS = 300
LEARNING_RATE = 1e-3
L2_STRENGTHS = (1.0, 1e-2, 1e-4)
ADD_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)


def fit(preps: Sequence[ideas.Prepared], l2: float, diagonal: bool) -> np.ndarray:
    """``W`` minimising the evidence loss on ``preps``' questions (Adam, full batch)."""
    d = preps[0].conv.vecs.shape[1]
    w = np.zeros((d,) if diagonal else (d, d), np.float32)
    m, v = np.zeros_like(w), np.zeros_like(w)
    n = sum(len(p.conv.qvecs) for p in preps)
    for t in range(1, STEPS + 1):
        grad = 2 * l2 * w
        for p in preps:
            q, mem = p.conv.qvecs, p.conv.vecs
            s = adapt_raw(q, w, diagonal) @ mem.T / TAU
            e = np.exp(s - s.max(axis=1, keepdims=True))
            pos = e * p.relevant
            d_s = e / e.sum(axis=1, keepdims=True) - pos / pos.sum(axis=1, keepdims=True)
            back = d_s @ mem / TAU / n  # d loss / d q'
            grad += (q * back).sum(axis=0) if diagonal else q.T @ back
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= LEARNING_RATE * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w


def adapt_raw(q: np.ndarray, w: np.ndarray, diagonal: bool) -> np.ndarray:
    return q * (1 + w) if diagonal else q + q @ w


def adapt(q: np.ndarray, w: np.ndarray, diagonal: bool) -> np.ndarray:
    a = adapt_raw(q, w, diagonal)
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def held_out(preps: list[ideas.Prepared], l2: float, diagonal: bool, mode: str) -> dict:
    """Mean of the two held-out recall@k; the adapter and the weights from each training half."""
    original = [p.cos for p in preps]
    grid = dict(bench.GRID) | ({"adapt": ADD_WEIGHTS} if mode == "add" else {})
    means: dict[int, list[float]] = {k: [] for k in bench.KS}
    chosen = []
    for train, test in bench.FOLDS:
        w = fit([preps[i] for i in train], l2, diagonal)
        for p, cos in zip(preps, original, strict=True):
            adapted = (adapt(p.conv.qvecs, w, diagonal) @ p.conv.vecs.T).astype(np.float32)
            p.cos, p.extra = (adapted, {}) if mode == "replace" else (cos, {"adapt": adapted})
        weights = ideas.choose([preps[i] for i in train], grid, None, ideas.CONTEXT_POOL)
        chosen.append(weights.get("adapt", "in place"))
        s = ideas._score([preps[i] for i in test], weights, None, ideas.CONTEXT_POOL)
        n = sum(s["total"].values())
        for k in bench.KS:
            means[k].append(sum(s["hits"][k].values()) / n)
    for p, cos in zip(preps, original, strict=True):
        p.cos, p.extra = cos, {}
    return {"mean": {k: float(np.mean(v)) for k, v in means.items()}, "adapt": chosen}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--granularity", choices=bench.GRANULARITIES, default="observations")
    ap.add_argument("--embed-cache", type=Path)
    args = ap.parse_args(argv)
    convs = bench.load(args.path, args.granularity)
    cache = VectorCache(args.embed_cache)
    bench.prepare(convs, cache)
    preps = [ideas.prepare(c) for c in convs]
    head = ideas.held_out(preps, dict(bench.GRID))["mean"]
    print(f"{'held out, ' + args.granularity:40s} " + " ".join(f"r@{k:<4d}" for k in bench.KS))
    print(f"{'shipped ranking (headline)':40s} " + " ".join(f"{head[k]:.4f}" for k in bench.KS))
    for diagonal in (False, True):
        for mode in ("replace", "add"):
            for l2 in L2_STRENGTHS:
                r = held_out(preps, l2, diagonal, mode)
                label = f"{'diagonal' if diagonal else 'full'} adapter, {mode}, L2 {l2:g}"
                figures = " ".join(f"{r['mean'][k]:.4f}" for k in bench.KS)
                print(f"{label:40s} {figures}   adapter weight per fold {r['adapt']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

# ruff: noqa
"""Round 30: the round-28 misses dump (bench/recall_round28/misses.py) with the round-30 cache,
written to .cache_r30/misses.pkl (MISSES=PATH), read by misses_read.py."""

import sys, pickle, time
import os
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pathlib import Path
import numpy as np
import recall_locomo as bench
import locomo_replica as rep
from locomo_cache import VectorCache

t0 = time.time()
sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

cache, convs, preps = common.load()
print("prepared", time.time() - t0)


def full_rank(p, w):
    f = rep.fused(p, w)
    idx = np.argsort(-f, axis=1, kind="stable")[:, :50]
    s = np.take_along_axis(f, idx, 1)
    if w.get("token"):
        s = s + np.float32(w["token"]) * rep.token_term(p, idx)
    if w["context"]:
        near = p.near[idx[:, :, None], idx[:, None, :]]
        nb = np.where(near, s[:, None, :], -np.inf).max(axis=2)
        s = s + np.float32(w["context"]) * np.where(np.isfinite(nb), nb, s)
    order = np.argsort(-s, axis=1, kind="stable")
    return idx, np.take_along_axis(idx, order, 1), f


rows = []
weights = []
for train, test in bench.FOLDS:
    w = rep.choose([preps[i] for i in train], bench.GRID, None, 50)
    weights.append(w)
    print("fold weights", w, time.time() - t0)
    for ci in test:
        p = preps[ci]
        pool1, final, f = full_rank(p, w)
        firstorder = np.argsort(-f, axis=1, kind="stable")
        cosorder = np.argsort(-p.cos, axis=1, kind="stable")
        bmorder = np.argsort(-p.bm25, axis=1, kind="stable")
        for qi, q in enumerate(p.conv.queries):
            rel = p.relevant[qi]
            ev = np.flatnonzero(rel)

            def pos(order):
                r = np.flatnonzero(rel[order])
                return int(r[0]) + 1 if len(r) else 0

            rows.append(
                dict(
                    conv=ci,
                    qi=qi,
                    q=q["question"],
                    a=str(q.get("answer")),
                    cat=q["category"],
                    ev=[p.conv.texts[e] for e in ev],
                    evidx=ev.tolist(),
                    final=pos(final[qi]),
                    first=pos(firstorder[qi]),
                    cos=pos(cosorder[qi]),
                    bm=pos(bmorder[qi]),
                    top5=[p.conv.texts[j] for j in final[qi][:5]],
                    top5idx=final[qi][:5].tolist(),
                    nmem=len(p.conv.texts),
                )
            )
pickle.dump(
    dict(rows=rows, weights=weights), open(os.environ.get("MISSES", ".cache_r30/misses.pkl"), "wb")
)
n = len(rows)
for k in (1, 5, 10):
    print(k, sum(0 < r["final"] <= k for r in rows) / n)
print("done", time.time() - t0)

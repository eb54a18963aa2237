# ruff: noqa
import sys, pickle
import os
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pathlib import Path
import numpy as np
import recall_locomo as bench, locomo_replica as rep
from locomo_cache import VectorCache

cache = VectorCache(Path(os.environ.get("EMBED_CACHE", "/tmp/round28_emb.npz")))
convs = bench.load(Path("../shared/data/locomo10.json"), "observations")
bench.prepare(convs, cache)
preps = [rep.prepare(c) for c in convs]
W = pickle.load(open("/tmp/round28_misses.pkl", "rb"))["weights"]
rows = []
for fi, (train, test) in enumerate(bench.FOLDS):
    w = W[fi]
    for ci in list(train) + list(test):
        p = preps[ci]
        f = rep.fused(p, w)
        idx = np.argsort(-f, axis=1, kind="stable")[:, :50]
        s = np.take_along_axis(f, idx, 1) + np.float32(w["token"]) * rep.token_term(p, idx)
        near = p.near[idx[:, :, None], idx[:, None, :]]
        nb = np.where(near, s[:, None, :], -np.inf).max(axis=2)
        s = s + np.float32(w["context"]) * np.where(np.isfinite(nb), nb, s)
        top = np.take_along_axis(idx, np.argsort(-s, axis=1, kind="stable"), 1)
        dense = p.cos + w["centroid"] * p.cent
        for qi in range(len(top)):
            o = np.argsort(-dense[qi])
            c1, c2 = o[0], o[1]
            t5 = top[qi][:5]
            rows.append(
                dict(
                    split="test" if ci in test else "train",
                    infused=c1 in t5,
                    rel=bool(p.relevant[qi][c1]),
                    margin=float(dense[qi][c1] - dense[qi][c2]),
                    fivrel=bool(p.relevant[qi][t5[4]]),
                    hit=bool(p.relevant[qi][t5].any()),
                )
            )
import collections

for split in ("train", "test"):
    R = [r for r in rows if r["split"] == split and not r["infused"]]
    print(
        split,
        "cos-top1 not in fused top5:",
        len(R),
        "relevant:",
        sum(r["rel"] for r in R),
        "and query missed:",
        sum(r["rel"] and not r["hit"] for r in R),
    )
    for th in (0.0, 0.02, 0.04, 0.06, 0.08, 0.1):
        S = [r for r in R if r["margin"] >= th]
        print(
            f"  margin>={th}: n={len(S)} rel={sum(r['rel'] for r in S)} gain-if-slot={sum(r['rel'] and not r['hit'] for r in S)} loss-if-5th-evicted={sum(r['fivrel'] and r['hit'] for r in S)}"
        )

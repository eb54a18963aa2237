# ruff: noqa
import sys, time, pickle
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
pickle.dump(None, open("/dev/null", "wb"))
d = pickle.load(open("/tmp/round28_misses.pkl", "rb"))
W = d["weights"]
agg = {k: [] for k in ("cos", "cent", "bm", "date", "token", "ctx")}
n = 0
for fi, (train, test) in enumerate(bench.FOLDS):
    w = W[fi]
    for ci in test:
        p = preps[ci]
        f = rep.fused(p, w)
        idx = np.argsort(-f, axis=1, kind="stable")[:, :50]
        tok = rep.token_term(p, idx)
        s = np.take_along_axis(f, idx, 1) + np.float32(w["token"]) * tok
        near = p.near[idx[:, :, None], idx[:, None, :]]
        nb = np.where(near, s[:, None, :], -np.inf).max(axis=2)
        ctx = np.float32(w["context"]) * np.where(np.isfinite(nb), nb, s)
        fin = s + ctx
        for qi in range(len(idx)):
            order = np.argsort(-fin[qi], kind="stable")
            rel = p.relevant[qi][idx[qi][order]]
            r = np.flatnonzero(rel)
            if not len(r) or r[0] < 5 or r[0] >= 10:
                continue
            e, b = order[r[0]], order[4]
            E, B = idx[qi][e], idx[qi][b]
            n += 1
            agg["cos"].append(p.cos[qi, E] - p.cos[qi, B])
            agg["cent"].append(w["centroid"] * (p.cent[0, E] - p.cent[0, B]))
            agg["bm"].append(w["lexical"] * (p.bm25[qi, E] - p.bm25[qi, B]))
            agg["date"].append(w["date"] * (p.date[qi, E] - p.date[qi, B]))
            agg["token"].append(w["token"] * (tok[qi, e] - tok[qi, b]))
            agg["ctx"].append(ctx[qi, e] - ctx[qi, b])
print(n)
for k, v in agg.items():
    v = np.array(v)
    print(
        f"{k:6s} mean {v.mean():+.4f} median {np.median(v):+.4f} neg-share {(v < 0).mean():.2f}  mean|.| {np.abs(v).mean():.4f}"
    )

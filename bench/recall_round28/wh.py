# ruff: noqa
"""wh-token probe: the question's wh-word state matched to each memory's best token (pool term)."""

import argparse, math, sys
import os
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pathlib import Path
import numpy as np
import recall_locomo as bench, locomo_replica as rep, recall_bootstrap as bootstrap
from locomo_cache import VectorCache
from memlife.embed import default_embedder
from memlife import token_match
from memlife.retrieval import CONTEXT_POOL

ap = argparse.ArgumentParser()
ap.add_argument("--granularity", default="observations")
args = ap.parse_args()
cache = VectorCache(Path(os.environ.get("EMBED_CACHE", "/tmp/round28_emb.npz")))
convs = bench.load(Path("../shared/data/locomo10.json"), args.granularity)
preps = rep.checked(convs, cache)
grid = dict(bench.GRID)
emb = default_embedder()
vocab = emb._tokenizer().get_vocab()
WH = {vocab[w] for w in ("what", "when", "where", "who", "whom", "whose", "which", "how", "why")}


def probes(c):
    """(Q, N) x2: wh-token state's best sign-cos match in each memory; question vector's."""
    bits = np.concatenate([cd.bits for cd in c.codes])
    starts = np.concatenate([[0], np.cumsum([len(cd) for cd in c.codes])[:-1]])
    wh = np.zeros((len(c.queries), len(c.texts)), np.float32)
    sv = np.zeros_like(wh)
    for qi, q in enumerate(c.queries):
        hidden, ids, mask, st = emb._forward([q["question"]], windows=1)
        states, pieces = emb._tokens_of(0, hidden, ids, mask, st)
        vec = emb._pool(hidden, mask, st)[0]
        rows = []
        at = [i for i, pc in enumerate(pieces) if int(pc) in WH]
        if at:
            s = states[at[0]]
            rows.append(s / np.linalg.norm(s))
        else:
            rows.append(np.zeros(384, np.float32))
        rows.append(vec)
        m = np.stack(rows).astype(np.float32) * np.float32(1 / math.sqrt(384))
        best = np.maximum.reduceat(token_match.sign_dots(m, bits, 384), starts, axis=1)
        if at:
            wh[qi] = best[0]
        sv[qi] = best[1]
    return wh, sv


for p in preps:
    p.pool_extra = dict(zip(("wh", "sv"), probes(p.conv)))
print("probes ready", flush=True)


def first_hits(p, w, post=None, pool=CONTEXT_POOL):
    f = rep.fused(p, w, post)
    pool = min(pool, f.shape[1])
    idx = np.argsort(-f, axis=1, kind="stable")[:, :pool]
    s = np.take_along_axis(f, idx, 1)
    if w.get("token") and p.tok_best is not None:
        s = s + np.float32(w["token"]) * rep.token_term(p, idx)
    for name, term in p.pool_extra.items():
        if w.get(name):
            t = np.take_along_axis(term, idx, 1)
            # min-max over the pool, per query (a scale-free pool term)
            lo, hi = t.min(axis=1, keepdims=True), t.max(axis=1, keepdims=True)
            s = s + np.float32(w[name]) * ((t - lo) / np.where(hi > lo, hi - lo, 1)).astype(
                np.float32
            )
    if w["context"] and f.shape[1] > 1:
        near = p.near[idx[:, :, None], idx[:, None, :]]
        nb = np.where(near, s[:, None, :], -np.inf).max(axis=2)
        s = s + np.float32(w["context"]) * np.where(np.isfinite(nb), nb, s)
    top = np.take_along_axis(idx, np.argsort(-s, axis=1, kind="stable")[:, :10], 1)
    rel = np.take_along_axis(p.relevant, top, 1)
    return np.where(rel.any(axis=1), rel.argmax(axis=1) + 1, 0)


rep.first_hits = first_hits
G = (0, 0.02, 0.05, 0.1, 0.2, 0.3)
runs = [
    ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
    ("wh-token probe (pool, min-max)", lambda: rep.held_out(preps, grid | {"wh": G})),
    (
        "question vector's best memory token (pool, min-max)",
        lambda: rep.held_out(preps, grid | {"sv": G}),
    ),
]
bootstrap.print_rows(runs, f"held out, {args.granularity}", bench.KS)

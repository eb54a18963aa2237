# ruff: noqa
import sys, math
import os
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pathlib import Path
import numpy as np
import recall_locomo as bench, locomo_replica as rep, recall_bootstrap as bootstrap
from locomo_cache import VectorCache

g = sys.argv[1] if len(sys.argv) > 1 else "observations"
cache = VectorCache(Path(os.environ.get("EMBED_CACHE", "/tmp/round28_emb.npz")))
convs = bench.load(Path("../shared/data/locomo10.json"), g)
preps = rep.checked(convs, cache)
grid = dict(bench.GRID)
shipped = rep.token_term


def make(floor, power=1.0):
    def token_term(p, idx):
        best = np.take_along_axis(p.tok_best, idx[:, None, :], 2)
        df = np.take_along_axis(p.tok_held, idx[:, None, :], 2).sum(axis=2)
        n = idx.shape[1]
        idf = ((np.log((n + 1) / (df + 1)) + floor) ** power) * p.tok_mask
        denom = idf.sum(axis=1)
        score = np.einsum("qt,qtp->qp", idf, best) / np.where(denom > 0, denom, 1.0)[:, None]
        return score.astype(np.float32)

    return token_term


def run(fn):
    def r():
        rep.token_term = fn
        try:
            return rep.held_out(preps, grid)
        finally:
            rep.token_term = shipped

    return r


runs = [
    ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
    ("token idf without the +1 floor", run(make(0.0))),
    ("token idf floor 0.5", run(make(0.5))),
    ("token idf squared (with floor 1)", run(make(1.0, 2.0))),
]
bootstrap.print_rows(runs, f"held out, {g}", bench.KS)

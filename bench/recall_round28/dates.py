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
wide = grid | {"date": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5)}


def scaled(kind):
    def run():
        saved = [p.date for p in preps]
        try:
            for p in preps:
                share = p.date.mean(axis=1, keepdims=True)
                n = p.date.shape[1]
                if kind == "1-share":
                    f = 1 - share
                else:
                    f = np.log(1 / np.maximum(share, 1 / n)) / math.log(n)
                p.date = (p.date * np.where(share > 0, f, 0)).astype(np.float32)
            return rep.held_out(preps, wide)
        finally:
            for p, d in zip(preps, saved):
                p.date = d

    return run


runs = [
    ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
    ("control: date grid widened to 1.5", lambda: rep.held_out(preps, wide)),
    ("date bonus x (1 - share of memories it covers)", scaled("1-share")),
    ("date bonus x log(1/share)/log(n) (selectivity)", scaled("log")),
]
bootstrap.print_rows(runs, f"held out, {g}", bench.KS)

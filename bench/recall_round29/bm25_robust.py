# ruff: noqa
"""Round 29, idea C: BM25 calibrated per query by its own distribution, held out.

BM25 enters the fused score divided by the query's best BM25 over the memories (shipped).
Tried before: z-scored dense + z-scored BM25 fusion (round 1, over all memories, before
dates), the token term z-scored over the pool (round 22), BM25 over the question's ideal
score or sqrt(top x ideal) (round 28). Here BM25 is put on a robust scale per query: the
median and the MAD (x 1.4826) of the query's BM25 over all the conversation's memories;
where the MAD is 0 (most memories share no term with the question), the median and MAD of
the non-zero scores; where that is 0 too, or fewer than 3 memories score, the shipped
max-normalised value. z = (bm - median) / MAD, clipped to [0, 20], divided by 20. Two
forms, fixed before the run:

- *in place*: the robust value replaces max-normalised BM25 (lexical grid as shipped);
- *added*: beside the shipped BM25, grid (0, 0.05, 0.1, 0.2, 0.3, 0.5).

Decision rule (fixed before the run): implement only if held-out recall@5 >= 0.85 and the
paired difference with the headline wins more questions than it loses.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round29/bm25_robust.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import common
import locomo_replica as rep
import recall_bootstrap as bootstrap
import recall_locomo as bench

CLIP = 20.0


def robust(p: rep.Prepared) -> tuple[np.ndarray, dict]:
    raw = np.stack([p.lexical.scores(q["question"]) for q in p.conv.queries]).astype(np.float64)
    out = np.zeros_like(raw)
    how = {"all": 0, "nonzero": 0, "max": 0}
    for qi, b in enumerate(raw):
        med = np.median(b)
        mad = 1.4826 * np.median(np.abs(b - med))
        kind = "all"
        if mad <= 0:
            nz = b[b > 0]
            kind = "nonzero"
            if len(nz) >= 3:
                med = np.median(nz)
                mad = 1.4826 * np.median(np.abs(nz - med))
            else:
                mad = 0.0
        if mad > 0:
            out[qi] = np.clip((b - med) / mad, 0, CLIP) / CLIP
        else:
            kind = "max"
            out[qi] = p.bm25[qi]
        how[kind] += 1
    return out.astype(np.float32), how


def main() -> int:
    cache, convs, preps = common.load()
    grid = dict(bench.GRID)
    rob = []
    total = {"all": 0, "nonzero": 0, "max": 0}
    for p in preps:
        r, how = robust(p)
        rob.append(r)
        for k, v in how.items():
            total[k] += v
    print("statistics taken over:", total)
    zero_share = np.mean(
        [
            (np.stack([p.lexical.scores(q["question"]) for q in p.conv.queries]) > 0).mean()
            for p in preps
        ]
    )
    print(f"share of memories with BM25 > 0 per query (mean over conversations): {zero_share:.3f}")

    def in_place():
        saved = [p.bm25 for p in preps]
        try:
            for p, r in zip(preps, rob):
                p.bm25 = r
            return rep.held_out(preps, grid)
        finally:
            for p, s in zip(preps, saved):
                p.bm25 = s

    runs = [
        ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
        ("BM25 robust-z in place of max-normalised", in_place),
        (
            "BM25 robust-z added beside it",
            lambda: rep.held_out_with(
                preps, grid, "bmz", lambda i, c: rob[i], (0, 0.05, 0.1, 0.2, 0.3, 0.5)
            ),
        ),
    ]
    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=44, weights_label="weights per fold"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

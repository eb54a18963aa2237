# ruff: noqa
"""Round 30: does each term work at all? A reading, not a result (weights on the test data).

With the shipped default weights on all ten conversations (0.8433 at recall@5 with every idea
off), each idea's term is added at a few weights, both folds at once, as round 2 checked its
zero rows; and ideas D's and E's held-out wins and losses are split between the questions each touches
(those naming two people; category questions) and the rest, whose change comes from the other weights moving.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round30/sensitivity.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np

import bm25_pieces
import common
import event_field
import instances
import locomo_replica as rep
import recall_locomo as bench
import two_names


def recall5(preps, w):
    s = rep._score(preps, w, None, rep.CONTEXT_POOL)
    return sum(s["hits"][5].values()) / sum(s["total"].values())


def main() -> int:
    cache, convs, preps = common.load()
    pieces = [bm25_pieces.piece_bm25(p) for p in preps]
    ev = [event_field.fields(p) for p in preps]
    both = [two_names.term(p)[0] for p in preps]
    inst = [instances.term(p)[0] for p in preps]
    terms = {
        "piece BM25": (pieces, (0.05, 0.1, 0.2, 0.3)),
        "event field": ([e[0] for e in ev], (0.05, 0.1, 0.2, 0.3)),
        "predicate head": ([e[1] for e in ev], (0.05, 0.1, 0.2, 0.3)),
        "two names": (both, (-0.02, -0.05, -0.1, -0.2)),
        "instances": (inst, (0.02, 0.05, 0.1, 0.2)),
    }
    print(f"shipped defaults, all ten, every idea off: {recall5(preps, bench.DEFAULTS):.4f}")
    for name, (t, ws) in terms.items():
        for p, m in zip(preps, t):
            p.extra = {"x": m}
        got = [f"{w:+.2f}: {recall5(preps, bench.DEFAULTS | {'x': w}):.4f}" for w in ws]
        print(f"{name:16s} " + "  ".join(got))
        for p in preps:
            p.extra = {}
    base = rep.held_out(preps, dict(bench.GRID))
    b = np.concatenate(base["ranks"])
    hb = (b > 0) & (b <= 5)
    ideas = (
        ("D", "both", both, (0, -0.02, -0.05, -0.1, -0.15, -0.2), "two-name"),
        ("E", "inst", inst, (0, 0.02, 0.05, 0.1, 0.15, 0.2), "category"),
    )
    for idea, name, t, ws, what in ideas:
        got = rep.held_out_with(preps, dict(bench.GRID), name, lambda i, c: t[i], ws)
        touched = np.concatenate([t[i].any(axis=1) for _, test in bench.FOLDS for i in test])
        d = np.concatenate(got["ranks"])
        hd = (d > 0) & (d <= 5)
        for label, m in ((f"{what} questions", touched), ("other questions", ~touched)):
            print(
                f"idea {idea}, {label} ({m.sum()}): r@5 {hb[m].mean():.3f} -> {hd[m].mean():.3f}, "
                f"won {(hd & ~hb & m).sum()}, lost {(hb & ~hd & m).sum()}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

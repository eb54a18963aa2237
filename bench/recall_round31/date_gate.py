# ruff: noqa
"""Round 31, idea D: the query-date bonus gated by how relevant the memory is.

Found while reading 14 held-out temporal misses (``misses_read.py 2 14 3`` on this round's
dump), so designed after looking at held-out misses; its forms and grid were fixed before
its run. "What did John attend with his colleagues in March 2023?": BM25 puts the evidence
("John attended a convention with colleagues ...") first, the final ranking 18th, behind
"John has recently graduated", "John had a picnic with his wife and kids recently" and
others from the named month. "Where was Dave in the last two weeks of August 2023?": the
top 5 holds "Dave had a card night with friends last Friday". The date bonus is flat: every
memory of the named period gets the same ``w_date``, however little else it shares with
the question, so under a question naming a busy month the period's small talk outranks
evidence told a little outside it (or inside it, by less than the bonus).

Earlier rounds changed the period (7-day grace, round 1; 8-45 days after, round 28), scaled
the bonus by how much of the store the period covers (round 28), or read other dates
(rounds 2, 8, 29). None made the bonus depend on the memory's match with the question.

Two forms, each in place of the flat bonus, with the shipped date grid (fixed before the
run): the bonus is ``w_date x inside x g``, with ``g`` per question over the conversation's
memories:

- *cosine gate*: g = the memory's cosine min-max scaled to [0, 1];
- *cosine and BM25 gate*: g = the mean of that and BM25 max-normalised (as fused).

Decision rule (fixed before the run): implement only if held-out recall@5 >= 0.85 and the
form wins more questions than it loses against the headline. The date-naming questions'
own won / lost is printed beside it.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round31/date_gate.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np

import common
import locomo_replica as rep
import recall_bootstrap as bootstrap
import recall_locomo as bench


def gate(p: rep.Prepared, form: str) -> np.ndarray:
    lo = p.cos.min(axis=1, keepdims=True)
    hi = p.cos.max(axis=1, keepdims=True)
    g = (p.cos - lo) / np.where(hi > lo, hi - lo, 1.0)
    if form == "cos+bm25":
        g = 0.5 * (g + p.bm25)
    return g.astype(np.float32)


def main() -> int:
    cache, convs, preps = common.load()
    grid = dict(bench.GRID)
    flat = [p.date for p in preps]

    def gated(form: str):
        def run() -> dict:
            for p in preps:
                p.date = (p.date * gate(p, form)).astype(np.float32)
            try:
                return rep.held_out(preps, grid)
            finally:
                for p, d in zip(preps, flat, strict=True):
                    p.date = d

        return run

    results = {}

    def record(label, fn):
        def run():
            results[label] = fn()
            return results[label]

        return run

    runs = [
        ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
        ("D. date bonus x cosine gate", gated("cos")),
        ("D. date bonus x cosine and BM25 gate", gated("cos+bm25")),
    ]
    bootstrap.print_rows(
        [(l, record(l, f)) for l, f in runs],
        "held out, observations",
        bench.KS,
        width=40,
        weights_label="weights per fold",
    )
    dated = np.concatenate(
        [(preps[i].date.max(axis=1) > 0) for f in bench.FOLDS for i in f[1]]
    )  # the question names a period holding some memory
    base = np.concatenate(results["shipped terms (headline)"]["ranks"])
    b5 = (base > 0) & (base <= 5)
    print(f"questions whose named period holds a memory: {int(dated.sum())}")
    for label, _ in runs[1:]:
        got = np.concatenate(results[label]["ranks"])
        g5 = (got > 0) & (got <= 5)
        print(
            f"{label}: those r@5 {b5[dated].mean():.3f} -> {g5[dated].mean():.3f} "
            f"(won {int((g5 & ~b5 & dated).sum())}, lost {int((b5 & ~g5 & dated).sum())}); "
            f"others won {int((g5 & ~b5 & ~dated).sum())}, lost {int((b5 & ~g5 & ~dated).sum())}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

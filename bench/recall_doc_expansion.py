"""Memories expanded with their neighbours' words for BM25; held out (issue 19, 24th round).

The context term lends a candidate a share of its conversation neighbours' *scores*. This
lends it their *words*: a second BM25 index over each memory's text followed by the text
of the memories created within the context window of it (``CONTEXT_WINDOW_S``, the same
session), so that a question whose words are split over two observations of one moment
("What did Melanie paint after the camping trip?") finds both in each. Its scores are
max-normalised per query, as the shipped BM25's are, and added with a weight of their own
(0 = off), chosen per training fold like every other. Two forms, fixed before the run:
every neighbour in the window, and only the memory just before and just after in time.

    uv run python bench/recall_doc_expansion.py ../shared/data/locomo10.json [--embed-cache FILE]
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import locomo_replica as replica
import numpy as np
import recall_bootstrap as bootstrap
import recall_locomo as bench
from locomo_replica import Prepared, held_out, held_out_with

from memlife.lexical import LexicalIndex

WEIGHTS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4)  # fixed before the run


def expanded(p: Prepared, adjacent: bool) -> list[str]:
    """Each memory's text, then its neighbours' (all in the window, or the two adjacent)."""
    c = p.conv
    order = np.argsort(c.created, kind="stable")
    place = np.empty_like(order)
    place[order] = np.arange(len(order))
    out = []
    for i, text in enumerate(c.texts):
        if adjacent:
            j = place[i]
            near = [order[k] for k in (j - 1, j + 1) if 0 <= k < len(order)]
            near = [k for k in near if p.near[i, k]]
        else:
            near = list(np.flatnonzero(p.near[i]))
        out.append(" ".join([text, *(c.texts[k] for k in near)]))
    return out


def expansion_term(p: Prepared, adjacent: bool) -> np.ndarray:
    """Q x N: BM25 over the expanded texts, max-normalised per query."""
    index = LexicalIndex(expanded(p, adjacent))
    bm = np.stack([index.scores(q["question"]) for q in p.conv.queries])
    top = bm.max(axis=1, keepdims=True)
    return np.where(top > 0, bm / np.where(top > 0, top, 1), 0).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    loaded = replica.observations_from_argv(argv, __doc__ or "")
    if loaded is None:
        return 1
    _, preps = loaded
    grid = dict(bench.GRID)
    terms = {adjacent: [expansion_term(p, adjacent) for p in preps] for adjacent in (False, True)}
    runs: list[tuple[str, Callable[[], dict]]] = [
        ("shipped terms (headline)", lambda: held_out(preps, grid)),
        (
            "BM25 over memory + its window",
            lambda: held_out_with(preps, grid, "expand", lambda i, c: terms[False][i], WEIGHTS),
        ),
        (
            "BM25 over memory + the two adjacent",
            lambda: held_out_with(preps, grid, "expand", lambda i, c: terms[True][i], WEIGHTS),
        ),
    ]
    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=36, weights_label="weights per fold"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

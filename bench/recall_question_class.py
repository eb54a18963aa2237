"""Weights per kind of question, read from its words; held out (issue 19, 24th round).

Every round so far chose one weight vector for every question. A "when" question may want
more of the date term and less of the cosine than a "what" question; "better fusion than a
fixed weight" could mean weights that follow what is asked. The kind is read from the
question's own words at query time (never from LoCoMo's category label), with rules fixed
before the run:

- **two kinds**: *when* (opens with or holds "when", "how long", "what year / month / date /
  day / time", "which year / month / day", "how many years / months / weeks / days") and
  every other question;
- **five kinds**: *when*, *who*, *where*, *yes-no or likely* (opens with is, are, was, were,
  do, does, did, would, could, can, has, have, will, should), and the rest (what, which,
  how, ...).

Each kind's weights are chosen by the headline's coordinate ascent on that kind's training
questions only, in two forms fixed beforehand: *cold* (the ascent starts where the
headline's does, every weight at its grid's first value) and *warm* (it starts from the
weights the fold's whole training half chose, so that a kind with few questions keeps them
unless its own questions say otherwise). Scored on the held-out half, each question with
its kind's weights, and paired question by question with the headline.

A last pair of rows varies the pool that token alignment and the context term reorder
(shipped: the best 50 of the first stage): 100 fixed, and the size chosen per training half
from 30, 50, 75 and 100. The pool's idf changes with it.

The script also prints how often the first stage's pool of 50 (the fused score before token
alignment and context) holds an evidence memory at all: no reordering of the pool can find
more than that.

    uv run python bench/recall_question_class.py ../shared/data/locomo10.json [--embed-cache FILE]
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

import locomo_replica as replica
import numpy as np
import recall_bootstrap as bootstrap
import recall_locomo as bench
from locomo_replica import Prepared, held_out

from memlife.retrieval import CONTEXT_POOL

POOLS = (30, 50, 75, 100)  # fixed before the run; 50 is shipped (CONTEXT_POOL)
_WHEN = re.compile(
    r"\bwhen\b|\bhow long\b|\bwhat (year|month|date|day|time)\b|\bwhich (year|month|day)\b"
    r"|\bhow many (years|months|weeks|days)\b",
    re.IGNORECASE,
)
_WHO = re.compile(r"^\s*(who|whom|whose)\b", re.IGNORECASE)
_WHERE = re.compile(r"^\s*where\b", re.IGNORECASE)
_YES_NO = re.compile(
    r"^\s*(is|are|was|were|do|does|did|would|could|can|has|have|will|should)\b", re.IGNORECASE
)


def two_kinds(question: str) -> str:
    return "when" if _WHEN.search(question) else "other"


def five_kinds(question: str) -> str:
    if _WHEN.search(question):
        return "when"
    for name, pattern in (("who", _WHO), ("where", _WHERE), ("yes-no", _YES_NO)):
        if pattern.match(question):
            return name
    return "other"


def subset(p: Prepared, rows: np.ndarray) -> Prepared:
    """``p`` with only the queries ``rows`` (a boolean mask over its queries)."""
    conv = replace(
        p.conv, queries=[q for q, keep in zip(p.conv.queries, rows, strict=True) if keep]
    )

    def cut(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[rows]

    return replace(
        p,
        conv=conv,
        cos=p.cos[rows],
        bm25=p.bm25[rows],
        date=p.date[rows],
        speaker=p.speaker[rows],
        relevant=p.relevant[rows],
        category=p.category[rows],
        extra={k: v[rows] for k, v in p.extra.items()},
        tok_best=cut(p.tok_best),
        tok_held=cut(p.tok_held),
        tok_mask=cut(p.tok_mask),
    )


def held_out_by_kind(
    preps: Sequence[Prepared], grid: dict, kind: Callable[[str], str], warm: bool
) -> dict:
    """The headline procedure with one weight vector per kind of question."""
    kinds = [np.array([kind(q["question"]) for q in p.conv.queries]) for p in preps]
    names = sorted({str(k) for ks in kinds for k in ks})
    weights, tests = [], []
    for train, test in bench.FOLDS:
        start = None
        if warm:
            start = replica.choose([preps[i] for i in train], grid, None, CONTEXT_POOL)
        chosen: dict[str, dict] = {}
        for name in names:
            part = [subset(preps[i], kinds[i] == name) for i in train]
            part = [p for p in part if len(p.category)]
            first = start or {n: v[0] for n, v in grid.items()}
            chosen[name] = bench.ascend(
                lambda w, part=part: replica._recall5(part, w, None, CONTEXT_POOL),
                grid,
                list(grid),
                dict(first),
            )
        weights.append({n: _short(w) for n, w in chosen.items()})
        tests.append(_score_by_kind([preps[i] for i in test], [kinds[i] for i in test], chosen))
    return replica.tally(tests) | {"idea_weights": weights}


def _short(w: dict) -> str:
    return ",".join(f"{k[:3]}{v:g}" for k, v in w.items())


def _score_by_kind(preps: Sequence[Prepared], kinds: Sequence[np.ndarray], chosen: dict) -> dict:
    """replica._score with each query ranked under its kind's weights (ranks kept in the
    queries' order, for the paired comparison)."""
    ranks = []
    for p, ks in zip(preps, kinds, strict=True):
        got = np.zeros(len(p.category), np.int64)
        for name, w in chosen.items():
            rows = ks == name
            if rows.any():
                got[rows] = replica.first_hits(subset(p, rows), w)
        ranks.append(got)
    return replica.scored(preps, ranks)


def held_out_by_pool(preps: Sequence[Prepared], grid: dict) -> dict:
    """The headline procedure with the size of the pool that the token and context terms
    reorder chosen per training half from POOLS, every weight chosen anew for each size."""
    weights, tests = [], []
    for train, test in bench.FOLDS:
        part = [preps[i] for i in train]
        tried = []
        for pool in POOLS:
            w = replica.choose(part, grid, None, pool)
            tried.append((replica._recall5(part, w, None, pool), -POOLS.index(pool), pool, w))
        _, _, pool, w = max(tried, key=lambda t: t[:2])  # ties: the smaller pool
        weights.append(f"pool {pool}")
        tests.append(replica._score([preps[i] for i in test], w, None, pool))
    return replica.tally(tests) | {"idea_weights": weights}


def pool_recall(preps: Sequence[Prepared], w: dict, pool: int = CONTEXT_POOL) -> float:
    """Share of questions with an evidence memory among the first stage's ``pool``."""
    found = total = 0
    for p in preps:
        idx = np.argsort(-replica.fused(p, w), axis=1, kind="stable")[:, :pool]
        found += int(np.take_along_axis(p.relevant, idx, 1).any(axis=1).sum())
        total += len(idx)
    return found / total


def main(argv: list[str] | None = None) -> int:
    loaded = replica.observations_from_argv(argv, __doc__ or "")
    if loaded is None:
        return 1
    _, preps = loaded
    grid = dict(bench.GRID)
    for label, kind in (("two kinds", two_kinds), ("five kinds", five_kinds)):
        counts = Counter(
            (kind(q["question"]), q["category"]) for p in preps for q in p.conv.queries
        )
        by_kind = Counter()
        for (k, _), n in counts.items():
            by_kind[k] += n
        print(f"{label}: " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())))
        for k in sorted(by_kind):
            cats = {bench.CATEGORIES[c]: n for (kk, c), n in sorted(counts.items()) if kk == k}
            print(f"   {k}: {cats}")
    for pool in (10, 20, 50, 100):
        print(
            f"first-stage pool of {pool}: evidence in it for {pool_recall(preps, bench.DEFAULTS, pool):.4f}"
        )

    runs: list[tuple[str, Callable[[], dict]]] = [
        ("shipped terms (headline)", lambda: held_out(preps, grid)),
        ("two kinds, cold", lambda: held_out_by_kind(preps, grid, two_kinds, warm=False)),
        ("two kinds, warm", lambda: held_out_by_kind(preps, grid, two_kinds, warm=True)),
        ("five kinds, cold", lambda: held_out_by_kind(preps, grid, five_kinds, warm=False)),
        ("five kinds, warm", lambda: held_out_by_kind(preps, grid, five_kinds, warm=True)),
        ("pool of 100 (fixed)", lambda: held_out(preps, grid, pool=100)),
        ("pool chosen per fold", lambda: held_out_by_pool(preps, grid)),
    ]
    bootstrap.print_rows(
        runs, "held out, observations", bench.KS, width=30, weights_label="weights per fold"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

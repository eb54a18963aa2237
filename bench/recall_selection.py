"""How the held-out weights are chosen, and who fills the top 5 (issue 19, 21st round).

The headline chooses every weight by coordinate ascent on recall@5 over five training
conversations; with the weights tuned on all ten the same ranking scores 0.850 against
0.845 held out. This measures ways to choose that might carry better to the other five,
and one way to fill the cut, each fixed before its run and compared question by question
with the headline (``recall_bootstrap.paired``):

- **objective**: the ascent on a smoother training score than recall@5 alone (the mean
  of recall@4..6, of recall@3..7, of recall@1..10; recall@5 with ties broken by recall@10);
- **bagging**: the ascent on 16 bootstrap resamples of the training questions (seed 0), the
  weights averaged (mean, and median);
- **slots**: the top 5 are the headline's first 5 - s, then the best s of another ranking
  not already in (BM25 alone, the cosine, the centroid-corrected cosine, the fused score
  before the token and context terms, the token term alone, the ranking without the
  context term), the ranking and s in {1, 2} chosen per training fold (s = 0 allowed).

    uv run python bench/recall_selection.py ../shared/data/locomo10.json [--only slots ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import locomo_replica as replica
import numpy as np
import recall_bootstrap as bootstrap
import recall_locomo as bench
from locomo_cache import VectorCache
from locomo_replica import Prepared

from memlife.retrieval import CONTEXT_POOL

Objective = Callable[[np.ndarray], float]
SLOT_VIEWS = ("bm25", "cos", "dense", "fused", "token", "no context")


def recall(ranks: np.ndarray, k: int) -> float:
    return float(((ranks > 0) & (ranks <= k)).mean())


def ranks(preps: Sequence[Prepared], w: dict) -> np.ndarray:
    return np.concatenate([replica.first_hits(p, w) for p in preps])


def ascend(preps: Sequence[Prepared], objective: Objective, pick: np.ndarray | None = None) -> dict:
    """The headline's coordinate ascent (bench.ascend) on ``objective`` of the training
    questions (``pick``: a resample of them)."""
    grid = dict(bench.GRID)
    start = {name: values[0] for name, values in grid.items()}

    def score(w: dict) -> float:
        r = ranks(preps, w)
        return objective(r if pick is None else r[pick])

    return bench.ascend(score, grid, list(grid), start)


OBJECTIVES: dict[str, Objective] = {
    "mean recall@4..6": lambda r: float(np.mean([recall(r, k) for k in (4, 5, 6)])),
    "mean recall@3..7": lambda r: float(np.mean([recall(r, k) for k in range(3, 8)])),
    "mean recall@1..10": lambda r: float(np.mean([recall(r, k) for k in range(1, 11)])),
    "recall@5, ties by recall@10": lambda r: recall(r, 5) + 1e-4 * recall(r, 10),
}


def bagged(preps: Sequence[Prepared], how: str, resamples: int = 16, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    n = sum(len(p.conv.queries) for p in preps)
    found = [ascend(preps, lambda r: recall(r, 5), rng.integers(0, n, n)) for _ in range(resamples)]
    agg = np.mean if how == "mean" else np.median
    return {name: float(agg([w[name] for w in found])) for name in bench.GRID}


def views(p: Prepared, w: dict) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The headline's order of its pool (Q x P) and each other ranking's best 10."""
    f = replica.fused(p, w)
    idx = np.argsort(-f, axis=1, kind="stable")[:, : min(CONTEXT_POOL, f.shape[1])]
    s = np.take_along_axis(f, idx, 1)
    tok = replica.token_term(p, idx) if p.tok_best is not None else np.zeros_like(s)
    with_tok = s + np.float32(w["token"]) * tok
    near = p.near[idx[:, :, None], idx[:, None, :]]
    nb = np.where(near, with_tok[:, None, :], -np.inf).max(axis=2)
    final = with_tok + np.float32(w["context"]) * np.where(np.isfinite(nb), nb, with_tok)

    def top(scores: np.ndarray, within: np.ndarray | None = None) -> np.ndarray:
        order = np.argsort(-scores, axis=1, kind="stable")[:, :10]
        return order if within is None else np.take_along_axis(within, order, 1)

    return top(final, idx), {
        "bm25": top(p.bm25),
        "cos": top(p.cos),
        "dense": top(p.cos + w["centroid"] * p.cent),
        "fused": idx[:, :10],
        "token": top(tok, idx),
        "no context": top(with_tok, idx),
    }


def slotted(preps: Sequence[Prepared], w: dict, view: str | None, s: int) -> np.ndarray:
    out = []
    for p in preps:
        head, other = views(p, w)
        tops = np.empty_like(head)
        for q in range(len(head)):
            picked = list(head[q, : 5 - s]) if view else list(head[q])
            if view:
                picked += [j for j in other[view][q] if j not in picked][:s]
                picked += [j for j in head[q] if j not in picked]
            tops[q] = picked[:10]
        rel = np.take_along_axis(p.relevant, tops, 1)
        out.append(np.where(rel.any(axis=1), rel.argmax(axis=1) + 1, 0))
    return np.concatenate(out)


def line(label: str, folds: list[np.ndarray], base: list[np.ndarray], note: object = "") -> None:
    m = " / ".join(f"{np.mean([recall(r, k) for r in folds]):.4f}" for k in bench.KS)
    d = bootstrap.paired(folds, base)
    print(f"{label:34s} {m}   r@5 vs headline {d['diff']:+.4f} [{d['lo']:+.4f}, "
          f"{d['hi']:+.4f}] won {d['wins']:.0f} lost {d['losses']:.0f}  {note}", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--embed-cache", type=Path)
    ap.add_argument("--only", nargs="*", default=["objective", "bagging", "slots"])
    args = ap.parse_args(argv)
    convs = bench.load(args.path, "observations")
    preps = replica.checked(convs, VectorCache(args.embed_cache))
    if preps is None:
        return 1
    folds = [([preps[i] for i in a], [preps[i] for i in b]) for a, b in bench.FOLDS]
    chosen = [ascend(train, lambda r: recall(r, 5)) for train, _ in folds]
    base = [ranks(test, w) for (_, test), w in zip(folds, chosen, strict=True)]
    print(f"{'':34s} r@1 / r@5 / r@10")
    line("headline (ascent on recall@5)", base, base)
    if "objective" in args.only:
        for name, objective in OBJECTIVES.items():
            ws = [ascend(train, objective) for train, _ in folds]
            line(name, [ranks(t, w) for (_, t), w in zip(folds, ws, strict=True)], base)
    if "bagging" in args.only:
        for how in ("mean", "median"):
            ws = [bagged(train, how) for train, _ in folds]
            line(f"bagged ascent, {how}", [ranks(t, w) for (_, t), w in zip(folds, ws, strict=True)],
                 base, [{k: round(v, 3) for k, v in w.items()} for w in ws])  # fmt: skip
    if "slots" in args.only:
        picks, tests = [], []
        for (train, test), w in zip(folds, chosen, strict=True):
            options = [(None, 0)] + [(v, s) for v in SLOT_VIEWS for s in (1, 2)]
            best = max(options, key=lambda o: (recall(slotted(train, w, *o), 5), -o[1]))
            picks.append(best)
            tests.append(slotted(test, w, *best))
        line("slots, ranking and s per fold", tests, base, picks)
        for view in SLOT_VIEWS:
            for s in (1, 2):
                got = [slotted(t, w, view, s) for (_, t), w in zip(folds, chosen, strict=True)]
                line(f"  slots: {s} from {view}", got, base)
    return 0


if __name__ == "__main__":
    sys.exit(main())

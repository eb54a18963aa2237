"""How far a held-out recall figure is from noise: bootstrap intervals over the questions.

The headline is the mean of two folds' held-out recall. Its interval resamples each fold's
test questions with replacement (the weights stay as the training fold chose them), so it
says how much the figure moves with the sample of questions alone. Questions of one
conversation are not independent, so the interval is, if anything, too narrow.

An idea is compared with the headline on the same questions (paired): the interval of the
difference, and how many questions it wins and loses at k.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

RESAMPLES = 2000
SEED = 0


def _hits(ranks: np.ndarray, k: int) -> np.ndarray:
    return ((ranks > 0) & (ranks <= k)).astype(np.float64)


def _resampled_means(per_fold: Sequence[np.ndarray], resamples: int, seed: int) -> np.ndarray:
    """Mean over folds of each fold's resampled mean, ``resamples`` times."""
    rng = np.random.default_rng(seed)
    total = np.zeros(resamples)
    for values in per_fold:
        idx = rng.integers(0, len(values), (resamples, len(values)))
        total += values[idx].mean(axis=1)
    return total / len(per_fold)


def interval(
    ranks_per_fold: Sequence[np.ndarray], k: int = 5, resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float]:
    """95% percentile interval of the mean over folds of recall@k (first-hit ranks, 0 = none)."""
    means = _resampled_means([_hits(np.asarray(r), k) for r in ranks_per_fold], resamples, seed)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def paired(
    idea: Sequence[np.ndarray],
    base: Sequence[np.ndarray],
    k: int = 5,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict[str, float]:
    """recall@k of ``idea`` minus ``base`` on the same questions: the difference, its 95%
    interval, and the questions only one of them finds in the top k."""
    if [len(a) for a in idea] != [len(b) for b in base]:
        raise ValueError("paired() needs the same questions in the same order")
    diffs = [
        _hits(np.asarray(a), k) - _hits(np.asarray(b), k) for a, b in zip(idea, base, strict=True)
    ]
    means = _resampled_means(diffs, resamples, seed)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {
        "diff": float(np.mean([d.mean() for d in diffs])),
        "lo": float(lo),
        "hi": float(hi),
        "wins": int(sum((d > 0).sum() for d in diffs)),
        "losses": int(sum((d < 0).sum() for d in diffs)),
    }


def print_rows(
    runs: Sequence[tuple[str, Callable[[], dict[str, Any]]]],
    heading: str,
    ks: Sequence[int],
    *,
    width: int = 44,
    weights_label: str = "idea weight per fold",
    before: Callable[[], None] | None = None,
) -> None:
    """Run each (label, held-out figure) in turn and print its row: recall at ``ks``, the
    weights each fold chose, recall@5 per category; the first row (the headline) with its
    interval, every later one paired with it (bench/recall_ideas.py, recall_pool_terms.py)."""
    print(f"{heading:{width}s} " + " ".join(f"r@{k:<4d}" for k in ks))
    base = None
    for label, fn in runs:
        if before is not None:
            before()
        r = fn()
        m = " ".join(f"{r['mean'][k]:.4f}" for k in ks)
        cats = " ".join(
            f"{c.split()[1]} {v['recall@5']:.3f}" for c, v in r["pooled"]["per_category"].items()
        )
        print(
            f"{label:{width}s} {m}   {weights_label} {r['idea_weights']}   r@5: {cats}", flush=True
        )
        if base is None:  # the headline runs first: every idea is compared with it
            base = r["ranks"]
            lo, hi = interval(base)
            print(f"{'':{width}s} r@5 95% interval over the questions [{lo:.4f}, {hi:.4f}]")
        else:
            d = paired(r["ranks"], base)
            print(
                f"{'':{width}s} r@5 vs headline {d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}], "
                f"questions won {d['wins']}, lost {d['losses']}"
            )

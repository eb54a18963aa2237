"""Subject inference's vectorised steps equal the per-row rules they replace (issue 16)."""

from __future__ import annotations

import numpy as np
import pytest

from memlife.group import closest_earlier


def per_row(vecs: np.ndarray, root: np.ndarray, merge: float, floor: float) -> list:
    """The former loop, verbatim: the same blocked products, then row by row the best
    earlier row of another statement below ``merge`` (the first on a tie), kept when it
    reaches ``floor``."""
    out = []
    for start in range(1, len(vecs), 256):
        stop = min(len(vecs), start + 256)
        sims = vecs[start:stop] @ vecs[:stop].T
        for r in range(stop - start):
            k = start + r
            row = sims[r, :k].copy()
            row[(root[:k] == root[k]) | (row >= merge)] = -np.inf
            if not len(row):
                continue
            j = int(np.argmax(row))
            if row[j] < floor:
                continue
            out.append((k, j, float(row[j])))
    return out


@pytest.mark.parametrize("n", [0, 1, 2, 7, 255, 256, 257, 600])
@pytest.mark.parametrize("seed", range(4))
def test_closest_earlier_equals_the_row_by_row_rule(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((5, 16)).astype(np.float32)
    vecs = centres[rng.integers(0, 5, n)] + 0.4 * rng.standard_normal((n, 16)).astype(np.float32)
    vecs[1::9] = vecs[::9][: len(vecs[1::9])]  # exact repeats: ties, and cosines at 1.0
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) if n else 1.0
    # a statement's root is an earlier row or the row itself
    root = np.array([int(rng.integers(0, k + 1)) if rng.random() < 0.3 else k for k in range(n)])
    want = per_row(vecs, root, 0.95, 0.6)
    got = closest_earlier(vecs, root, 0.95, 0.6)
    assert got == want
    if n >= 256:
        assert want  # the data reach the floor: the comparison is not vacuous

"""A coarse pass for recall over one large set: one bit per dimension, exact re-rank after.

At 100k memories the exact dense term of :func:`memlife.retrieval.rank` is a 100k x 384
float32 matrix-vector product: 154 MB read per query, memory-bound, ~11 ms of the 25 ms
budget on the 2-core machine. The codes here are 48 bytes a row (4.8 MB at 100k): the
sign of each coordinate of ``R (v - c)``, with ``R`` a fixed random rotation (so the
bits are not dominated by a few coordinates) and ``c`` a centre frozen when the codes
are built (MiniLM vectors share a common direction; without it most bits agree for
every row). The Hamming distance ``h`` between a row's code and the query's estimates
the angle between them (``pi * h / bits``, sign random projection), so

    v . w  ~  c . w + |v - c| |w| cos(pi h / bits)

estimates the dense term for every row at a twentieth of the reads. ``rank`` adds the
exact lexical and date terms to that estimate, takes the best ``candidates`` rows, and
computes the exact score of those only; the final ranking is the exact formula over the
candidates. It equals the full computation whenever the true top rows are among the
candidates: ``tests/unit/test_coarse.py`` measures how often, BENCHMARKS.md reports it.
Sets smaller than ``COARSE_MIN_ROWS`` never take this path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

COARSE_MIN_ROWS = 50_000  # below this the exact product is cheap enough (~5 ms): no codes
COARSE_CANDIDATES = 2_000  # rows re-ranked exactly (plus the pool rank() needs)
_SEED = 20261130


def _rotation(dim: int) -> np.ndarray:
    """A fixed random orthogonal matrix (seeded: codes built twice are the same codes)."""
    q, r = np.linalg.qr(np.random.default_rng(_SEED).standard_normal((dim, dim)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


class SignCodes:
    """Row-aligned sign codes of a vector set; rows appended and swap-removed like the set."""

    def __init__(self, vectors: np.ndarray, center: np.ndarray | None = None):
        mat = np.asarray(vectors, dtype=np.float32)
        self.dim = mat.shape[1]
        if self.dim % 64:
            raise ValueError(f"sign codes need a dimension divisible by 64, got {self.dim}")
        self.words = self.dim // 64
        if center is None:
            center = mat.mean(axis=0) if len(mat) else np.zeros(self.dim, np.float32)
        self.center = np.asarray(center, np.float32)
        self._rot = _rotation(self.dim)
        self.n = 0
        # word-major (words, capacity): a query XORs each contiguous word row with a scalar
        self._codes = np.zeros((self.words, max(16, len(mat))), dtype=np.uint64)
        self._norms = np.zeros(max(16, len(mat)), dtype=np.float32)
        # cos(pi * h / bits) for every possible Hamming distance h
        self._cos = np.cos(np.pi * np.arange(self.dim + 1) / self.dim).astype(np.float32)
        for start in range(0, len(mat), 8192):  # bounded scratch memory
            self._put(mat[start : start + 8192], start)
        self.n = len(mat)

    def __len__(self) -> int:
        return self.n

    def _encode(self, centred_rotated: np.ndarray) -> np.ndarray:
        bits = np.packbits(centred_rotated > 0, axis=1)
        return np.ascontiguousarray(bits).view(np.uint64)

    def _put(self, rows: np.ndarray, at: int) -> None:
        x = (rows - self.center) @ self._rot.T
        self._codes[:, at : at + len(rows)] = self._encode(x).T
        self._norms[at : at + len(rows)] = np.linalg.norm(x, axis=1)

    def append(self, vector: np.ndarray) -> int:
        row = self.n
        if row == self._codes.shape[1]:
            self._codes = np.concatenate([self._codes, np.zeros_like(self._codes)], axis=1)
            self._norms = np.concatenate([self._norms, np.zeros_like(self._norms)])
        self._put(np.asarray(vector, np.float32).reshape(1, -1), row)
        self.n += 1
        return row

    def remove(self, row: int) -> None:
        """Remove ``row``; the last row moves into its place (as the vector set does)."""
        last = self.n - 1
        self._codes[:, row] = self._codes[:, last]
        self._norms[row] = self._norms[last]
        self.n -= 1

    def estimate(self, w: np.ndarray) -> np.ndarray:
        """Estimated ``v . w`` of every row (float32, n)."""
        w = np.asarray(w, np.float32)
        x = (self._rot @ w).reshape(1, -1)
        qcode = self._encode(x)[0]
        n = self.n
        h = np.zeros(n, dtype=np.uint16)
        scratch = np.empty(n, dtype=np.uint64)
        for j in range(self.words):
            np.bitwise_xor(self._codes[j, :n], qcode[j], out=scratch)
            h += np.bitwise_count(scratch)
        est: np.ndarray = self._norms[:n] * self._cos[h]
        est *= np.float32(np.linalg.norm(x))
        est += np.float32(self.center @ w)
        return est


def rerank_coarse(
    coarse: SignCodes,
    mat: np.ndarray,
    q: np.ndarray,
    w: np.ndarray,
    const: np.float32 | None,
    terms: list[np.ndarray],
    m: int,
    threshold: float | None,
    best_eligible: Callable[..., tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``best_eligible`` (retrieval's) over the rows the estimate ranks best, scored exactly.

    The estimate replaces only the dense term (``memlife.coarse``); the exact score of the
    chosen rows is the same formula as the full path. None when fewer than ``m`` of them
    pass the threshold: the caller then scores every row.
    """
    est = coarse.estimate(w)
    for term in terms:
        est += term
    take = min(len(est), COARSE_CANDIDATES + m)
    rows = np.sort(np.argpartition(est, len(est) - take)[len(est) - take :])  # index order
    sub = mat[rows]
    # einsum, not BLAS: a threaded OpenBLAS gemv on ~2k rows waits on thread hand-offs
    # (10+ ms on a busy machine) for 0.2 ms of work
    fused = np.einsum("ij,j->i", sub, w)
    sims = fused if const is None else None
    if const is not None:
        fused = fused + const
    for term in terms:
        fused = fused + term[rows]
    pool, pool_sims = best_eligible(fused, m, sub, q, sims, threshold)
    if len(pool) < m:
        return None
    return rows[pool], pool_sims, fused[pool]

"""Token alignment: recall's late-interaction term over the embedding model's token states.

Why: a memory's sentence vector is the mean of its tokens' states. In a long, chatty memory
("Nice! By the way, I finally went to that support group on Friday...") the few tokens
that answer a question are averaged with everything else, and the vector drifts toward
small talk. Matching each question token to its best token in the memory keeps them apart
(ColBERT's MaxSim; BERTScore's recall with idf weights). The states are the ones the
embedding pass computes anyway, so no second model runs.

The score of a memory d for a question q, over the question's content tokens t (words, not
word pieces, stopwords or punctuation):

    sum_t idf(t) * max_j (q_t . s_j) / sum_t idf(t)

``s_j`` is the sign pattern of d's j-th token state, scaled to unit length: a memory's
states are kept as sign bits (48 bytes a token for 384 dimensions), the question's in
float. ``idf`` is taken over the candidates being reordered (the best CONTEXT_POOL of the
fused ranking): a piece every candidate shares (the person's name the question asks
about) counts little, one that tells them apart counts most.

Held out on LoCoMo (bench/recall_locomo.py, weights chosen on five conversations and
scored on the other five): recall@5 rises most on raw conversation turns, a little on
short observations; BENCHMARKS.md has the figures and the variants that were measured
(float or int8 states, idf over all memories, no idf, the whole corpus instead of the pool).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memlife.int8_matmul import matmul_u8s8


@dataclass(frozen=True)
class TokenCodes:
    """One memory's tokens: word-piece ids and the sign bits of their states (row per token)."""

    pieces: np.ndarray  # uint16 (n,)
    bits: np.ndarray  # uint8 (n, dim / 8)

    def __len__(self) -> int:
        return len(self.pieces)

    def to_bytes(self) -> bytes:
        """pieces (little-endian uint16) then bits: the stored form (``from_bytes``)."""
        return self.pieces.astype("<u2").tobytes() + self.bits.tobytes()

    @classmethod
    def from_bytes(cls, blob: bytes, n: int, dim: int) -> TokenCodes:
        width = dim // 8
        if len(blob) != n * (2 + width):
            raise ValueError(f"token codes of {len(blob)} bytes for {n} tokens of {dim} dims")
        pieces = np.frombuffer(blob, dtype="<u2", count=n).astype(np.uint16)
        bits = np.frombuffer(blob, dtype=np.uint8, offset=2 * n).reshape(n, width)
        return cls(pieces=pieces, bits=bits)


@dataclass(frozen=True)
class QueryTokens:
    """A question's content tokens: unit float states and their word-piece ids."""

    states: np.ndarray  # float32 (t, dim), rows L2-normalised
    pieces: np.ndarray  # int64 (t,)

    def __len__(self) -> int:
        return len(self.pieces)


def pack(states: np.ndarray, pieces: np.ndarray) -> TokenCodes:
    """A memory's token states (n, dim) as sign bits, with their word-piece ids."""
    bits = np.packbits(np.asarray(states) > 0, axis=1)
    return TokenCodes(pieces=np.asarray(pieces, dtype=np.uint16), bits=bits)


# A question's content tokens matched, at most: each costs a pass over every candidate
# token, and a question rarely has 20. A pasted page as the query stays bounded.
MAX_QUERY_TOKENS = 64


def query_tokens(states: np.ndarray, pieces: np.ndarray, content: np.ndarray) -> QueryTokens:
    """The question's first MAX_QUERY_TOKENS content tokens (``content``: a bool per
    vocabulary id), unit rows."""
    pieces = np.asarray(pieces, dtype=np.int64)
    keep = content[pieces] & (np.cumsum(content[pieces]) <= MAX_QUERY_TOKENS)
    s = np.asarray(states, dtype=np.float32)[keep]
    norms = np.linalg.norm(s, axis=1, keepdims=True)
    return QueryTokens(states=s / np.maximum(norms, 1e-12), pieces=pieces[keep])


def scaled_states(query: QueryTokens) -> np.ndarray:
    """The question's token states times 1/sqrt(dim): a dot with a row of +-1 signs is
    then the cosine with the sign pattern at unit length."""
    dim = query.states.shape[1]
    out: np.ndarray = query.states * np.float32(1.0 / math.sqrt(dim))
    return out


# Candidate tokens unpacked to 0/1 bytes at a time: bounds what a query holds (50 memories
# of 1,016 tokens would unpack to 19.5 MB at once).
UNPACK_BLOCK = 8192


def quantise(scaled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row as int8 times its own scale (its largest magnitude / 127); a row whose scale
    would be 0 (all zeros, or too small for float32) keeps scale 1. Rounding moves a row's
    dot with any 0/1 row by at most dim * scale / 2."""
    peak = np.abs(scaled).max(axis=1) if scaled.size else np.zeros(len(scaled), np.float32)
    step = (peak / np.float32(127.0)).astype(np.float32)
    scale = np.where(step > 0, step, np.float32(1.0))  # a row too small for a step: zero
    with np.errstate(invalid="ignore"):  # NaN in a row: its dots are NaN, as in float
        ints = np.clip(np.rint(scaled / scale[:, None]), -127, 127).astype(np.int8)
    return ints, scale


def sign_dots(scaled: np.ndarray, bits: np.ndarray, dim: int) -> np.ndarray:
    """(t, n) float32: each row of ``scaled`` dotted with each token's signs (+1 where its
    bit is set, -1 where not). With b the bits as 0/1, q . (2b - 1) = 2 q.b - sum(q), and
    q.b is an integer product (``memlife.int8_matmul``): the bits unpacked to bytes, q
    rounded to int8 per row. 2-3x faster than the float product over every token's bits
    turned into floats, and the held-out recall of every LoCoMo granularity is unchanged
    (BENCHMARKS.md, "Issue 19, tenth round")."""
    ints, scale = quantise(np.asarray(scaled, dtype=np.float32))
    right = np.ascontiguousarray(ints.T)
    prod = np.empty((len(bits), len(scaled)), dtype=np.int32)
    for start in range(0, len(bits), UNPACK_BLOCK):
        part = np.unpackbits(bits[start : start + UNPACK_BLOCK], axis=1, count=dim)
        prod[start : start + len(part)] = matmul_u8s8(part, right)
    out: np.ndarray = prod.T.astype(np.float32)
    out *= (np.float32(2.0) * scale)[:, None]
    out -= scaled.sum(axis=1, keepdims=True, dtype=np.float32)
    return out


def alignment(query: QueryTokens, candidates: Sequence[TokenCodes | None]) -> np.ndarray:
    """float32 score per candidate (module doc); 0 for a candidate without codes, and for
    every candidate when the question has no content token."""
    out = np.zeros(len(candidates), dtype=np.float32)
    present = [i for i, c in enumerate(candidates) if c is not None and len(c)]
    if not len(query) or not present:
        return out
    dim = query.states.shape[1]
    codes = [candidates[i] for i in present]
    bits = np.concatenate([c.bits for c in codes if c is not None])
    sizes = np.array([len(c) for c in codes if c is not None])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    # best match of every question token in every candidate: (t, candidates); the unit
    # scale goes on the few question rows, not on every candidate token
    best = np.maximum.reduceat(sign_dots(scaled_states(query), bits, dim), starts, axis=1)
    # idf over the candidates: how many of them hold each of the question's pieces
    n = len(codes)
    pieces = np.concatenate([c.pieces for c in codes if c is not None])
    same = pieces[None, :] == query.pieces[:, None]  # (t, all candidate tokens)
    df = np.logical_or.reduceat(same, starts, axis=1).sum(axis=1)
    idf = np.log((n + 1) / (df + 1)) + 1.0
    out[present] = (idf @ best) / idf.sum()
    return out

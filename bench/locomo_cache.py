"""LoCoMo benchmark caches: every memory's and question's MiniLM vector and token codes,
kept in .npz files between runs (outside the repository), so that a held-out figure
takes seconds after the first run instead of minutes of embedding."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memlife.embed import DIM, default_embedder
from memlife.token_match import QueryTokens, TokenCodes


class VectorCache:
    """text -> vector, kept in an .npz between runs when a path is given."""

    def __init__(self, path: Path | None):
        self.path = path
        self.vectors: dict[str, np.ndarray] = {}
        if path is not None and path.exists():
            with np.load(path, allow_pickle=False) as z:
                self.vectors = dict(zip(z["texts"].tolist(), z["vecs"], strict=True))
        self.added = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        todo = sorted({t for t in texts if t not in self.vectors})
        if todo:
            for t, v in zip(todo, default_embedder().embed(todo), strict=True):
                self.vectors[t] = v
            self.added += len(todo)
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)

    def save(self) -> None:
        if self.path is not None and self.added:
            texts = list(self.vectors)
            np.savez(self.path, texts=np.array(texts), vecs=np.stack(list(self.vectors.values())))


class TokenCache:
    """text -> token codes (memories) and question -> content tokens, kept in an .npz
    beside the vector cache (``FILE.tokens.npz``) when a path is given."""

    def __init__(self, path: Path | None):
        self.path = path if path is None else path.with_suffix(".tokens.npz")
        self.codes: dict[str, TokenCodes] = {}
        self.queries: dict[str, QueryTokens] = {}
        self.added = 0
        if self.path is not None and self.path.exists():
            with np.load(self.path, allow_pickle=False) as z:
                for t, n, blob in zip(z["mtexts"].tolist(), z["mn"], z["mblobs"], strict=True):
                    self.codes[t] = TokenCodes.from_bytes(
                        bytes(blob[: n * (2 + DIM // 8)]), int(n), DIM
                    )
                # each array read once: z[name] reads the whole array again on every access
                states, pieces = z["qstates"], z["qpieces"]
                off = np.concatenate([[0], np.cumsum(z["qn"])])
                for i, t in enumerate(z["qtexts"].tolist()):
                    lo, hi = off[i], off[i + 1]
                    self.queries[t] = QueryTokens(states[lo:hi].copy(), pieces[lo:hi].copy())

    def memory_codes(self, texts: list[str]) -> list[TokenCodes]:
        todo = sorted({t for t in texts if t not in self.codes})
        if todo:
            _, codes = default_embedder().embed_with_tokens(todo)
            self.codes.update(zip(todo, codes, strict=True))
            self.added += len(todo)
        return [self.codes[t] for t in texts]

    def query_tokens(self, questions: list[str]) -> list[QueryTokens]:
        for q in questions:
            if q not in self.queries:
                self.queries[q] = default_embedder().embed_query(q)[1]
                self.added += 1
        return [self.queries[q] for q in questions]

    def save(self) -> None:
        if self.path is None or not self.added:
            return
        mtexts = list(self.codes)
        blobs = [self.codes[t].to_bytes() for t in mtexts]
        width = max(len(b) for b in blobs)
        qtexts = list(self.queries)
        np.savez(
            self.path,
            mtexts=np.array(mtexts),
            mn=np.array([len(self.codes[t]) for t in mtexts]),
            mblobs=np.array([np.frombuffer(b.ljust(width, b"\0"), np.uint8) for b in blobs]),
            qtexts=np.array(qtexts),
            qn=np.array([len(self.queries[t]) for t in qtexts]),
            qstates=np.concatenate([self.queries[t].states for t in qtexts]),
            qpieces=np.concatenate([self.queries[t].pieces for t in qtexts]),
        )

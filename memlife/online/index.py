"""The online recall index of one actor + namespace: ids, vectors, BM25 and exact-duplicate
keys of its ACTIVE records, row-aligned and kept in step with writes.

Removal swaps the last row into the freed one, so every structure stays dense and
``vectors`` is a contiguous float32 matrix that :func:`memlife.retrieval.rank` uses
without a copy. The centroid is a running sum, so a query need not recompute it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memlife.coarse import COARSE_MIN_ROWS, SignCodes
from memlife.lexical import LexicalIndex
from memlife.model import content_sha256
from memlife.text import negates, norm_sha256
from memlife.timeref import epoch_seconds
from memlife.token_match import TokenCodes

# ids -> their token codes (None: the embedder gives none), read or computed by the owner
CodesSource = Callable[[Sequence[str]], Sequence[TokenCodes | None] | None]

# Text analysed per record in the online index (negation, BM25 terms): a record larger
# than this (imported before the content bound, or from a remote store) costs no more.
ANALYSIS_WINDOW = 64 * 1024


def norm_key(content: str) -> str:
    """The exact-duplicate key: folded text, or the plain hash of an oversized text."""
    if len(content) > ANALYSIS_WINDOW:
        return "sha:" + content_sha256(content)
    return norm_sha256(content)


@dataclass
class ShardIndex:
    """One actor + namespace: the active records' ids, vectors and lexical index, row-aligned.

    ``fingerprint``, ``checked_epoch`` and ``loaded_at`` belong to the owner's staleness
    check (:class:`memlife.online.memory.LongTermMemory`); the index carries them, and
    :meth:`shift` / :meth:`drop` keep ``fingerprint`` describing exactly the rows held.
    """

    actor_id: str
    namespace: str
    dim: int
    ids: list[str] = field(default_factory=list)
    negated: list[bool] = field(default_factory=list)
    lexical: LexicalIndex = field(default_factory=LexicalIndex)
    row_of: dict[str, int] = field(default_factory=dict)
    by_norm: dict[str, list[str]] = field(default_factory=dict)  # normalised text sha -> ids
    norm_of: dict[str, str] = field(default_factory=dict)  # id -> normalised text sha
    fingerprint: Any = None
    checked_epoch: int = -1
    loaded_at: float = 0.0
    codes_source: CodesSource | None = None

    def __post_init__(self) -> None:
        self._buf = np.zeros((16, self.dim), dtype=np.float32)
        self._created = np.zeros(16, dtype=np.float64)  # POSIX seconds, row-aligned
        self._sum = np.zeros(self.dim, dtype=np.float64)  # running sum of the rows (centroid)
        self._coarse: SignCodes | None = None  # built on first use by a large shard
        # token codes by row (token alignment), fetched when a row first reaches a pool
        self._codes: list[TokenCodes | None] = []

    def coarse(self) -> SignCodes | None:
        """Sign codes of the rows for rank()'s coarse pass, once the shard is large enough
        to need them (built once, ~1 s at 100k; then kept in step with every write)."""
        if self._coarse is None and self.n >= COARSE_MIN_ROWS:
            self._coarse = SignCodes(self.vectors, center=self.centroid)
        return self._coarse

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def vectors(self) -> np.ndarray:
        return self._buf[: self.n]  # C-contiguous float32: rank() uses it without a copy

    @property
    def created(self) -> np.ndarray:
        return self._created[: self.n]

    @property
    def centroid(self) -> np.ndarray:
        """Mean of the rows, kept as a running sum: rank() need not recompute it per query."""
        return (self._sum / max(self.n, 1)).astype(np.float32)

    def token_codes(self, rows: np.ndarray) -> list[TokenCodes | None]:
        """The token codes of ``rows`` (retrieval.rank's pool), fetched from
        ``codes_source`` the first time a row needs them; None where none can be had."""
        missing = [int(r) for r in rows if self._codes[int(r)] is None]
        if missing and self.codes_source is not None:
            got = self.codes_source([self.ids[r] for r in missing])
            if got is not None:
                for r, c in zip(missing, got, strict=True):
                    self._codes[r] = c
        return [self._codes[int(r)] for r in rows]

    def exact(self, content: str) -> int | None:
        ids = self.by_norm.get(norm_key(content))
        return self.row_of[ids[0]] if ids else None

    def append(
        self, rid: str, content: str, vector: np.ndarray, created: datetime | None = None
    ) -> None:
        if rid in self.row_of:
            self.remove(rid)
        row = self.n
        if row == len(self._buf):
            grown = np.zeros((2 * len(self._buf), self.dim), dtype=np.float32)
            grown[:row] = self._buf[:row]
            self._buf = grown
            self._created = np.concatenate([self._created, np.zeros_like(self._created)])
        self._buf[row] = vector
        self._created[row] = epoch_seconds(created) if created is not None else time.time()
        self._sum += self._buf[row]
        if self._coarse is not None:
            self._coarse.append(self._buf[row])
        nsha = norm_key(content)
        head = content[:ANALYSIS_WINDOW]  # bounded work per record, however large it is
        self.ids.append(rid)
        self._codes.append(None)
        self.negated.append(negates(head))
        self.row_of[rid] = row
        self.by_norm.setdefault(nsha, []).append(rid)
        self.norm_of[rid] = nsha
        self.lexical.append(head)

    def remove(self, rid: str) -> bool:
        row = self.row_of.pop(rid, None)
        if row is None:
            return False
        last = self.n - 1
        self._sum -= self._buf[row]
        if self._coarse is not None:
            self._coarse.remove(row)  # the same swap as the rows below
        if last == 0:
            self._sum[:] = 0.0  # empty shard: no float drift carried over
        if row != last:
            self._buf[row] = self._buf[last]
            self._created[row] = self._created[last]
            self.ids[row] = self.ids[last]
            self._codes[row] = self._codes[last]
            self.negated[row] = self.negated[last]
            self.row_of[self.ids[row]] = row
        self.ids.pop()
        self._codes.pop()
        self.negated.pop()
        self.lexical.remove(row)
        nsha = self.norm_of.pop(rid)
        same = self.by_norm[nsha]
        same.remove(rid)
        if not same:
            del self.by_norm[nsha]
        return True

    def shift(self, share: Sequence[float] | None, sign: int = 1) -> None:
        """Move ``fingerprint`` by one record's share (its row added: ``sign`` 1, removed:
        -1), so it keeps describing the rows held, not the store as once loaded: a record
        made active again elsewhere then no longer matches. Share unknown (no signal, the
        record gone): fingerprint unknown, and the shard is re-checked (reloaded) on use."""
        if share is None or self.fingerprint is None:
            self.fingerprint = None
            self.checked_epoch = -1
        else:
            self.fingerprint = tuple(
                a + sign * b for a, b in zip(self.fingerprint, share, strict=True)
            )

    def drop(self, rid: str, share: Sequence[float] | None) -> bool:
        """:meth:`remove` a row and take its ``share`` out of the fingerprint."""
        if not self.remove(rid):
            return False
        self.shift(share, -1)
        return True

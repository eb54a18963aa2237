"""The embedding cache in the state table: ``emb#{content_sha256}`` / model id -> vector.

Keyed like the SQLite cache (content hash + model), so a worker on any machine finds the
vectors another computed; erasure deletes every model's vector of an erased content
(:meth:`delete_for`), its token codes included (model id + TOKENS). A vector is float32 bytes (384 dims: 1.5 KB, far below the item
limit); nothing else of the content is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memlife.embed import Embedder
from memlife.embed_cache import EmbeddingCache
from memlife.state.dynamodb import QUERY_WORKERS, DynamoState, key


class DynamoEmbeddingCache(EmbeddingCache):
    def __init__(self, state: DynamoState, embedder: Embedder | None = None, *,
                 batch_size: int = 256, recent: int = 0, **_: Any) -> None:  # fmt: skip
        from memlife.embed_cache import CacheStats

        self._keep_recent(recent)
        self.state = state
        self._embedder = embedder
        self.batch_size = batch_size
        self.stats = CacheStats()
        self._stats_lock = threading.Lock()
        self._own = False
        self.connection = None  # no file to compact or vacuum
        self.lock = threading.RLock()

    def _lookup_blobs(self, shas: Sequence[str], model_id: str) -> dict[str, tuple[int, bytes]]:
        items = self.state.batch_get([key(f"emb#{s}", model_id) for s in shas])
        return {i["pk"]["S"][4:]: (int(i["dim"]["N"]), bytes(i["vector"]["B"])) for i in items}

    def _store(self, rows: list[tuple[str, str, int, bytes]], *, wait: bool = True) -> bool:
        # DynamoDB has no write lock to wait on: ``wait`` changes nothing
        self.state.batch_write(puts=[
            {**key(f"emb#{sha}", model), "dim": {"N": str(dim)}, "vector": {"B": blob}}
            for sha, model, dim, blob in rows
        ])  # fmt: skip
        return True

    def delete_for(self, shas: Iterable[str]) -> int:
        """Forget the vectors of these contents under every model; returns items deleted.
        One query per content finds its models' items; a night's deletions ask for
        thousands, so the queries run QUERY_WORKERS at a time."""
        shas = list(dict.fromkeys(shas))
        self._forget_recent(shas)

        def items_of(sha: str) -> list[dict[str, Any]]:
            return list(self.state.query(f"emb#{sha}", ProjectionExpression="pk, sk"))

        if len(shas) > 1:
            with ThreadPoolExecutor(min(QUERY_WORKERS, len(shas))) as pool:
                found = list(pool.map(items_of, shas))
        else:
            found = [items_of(s) for s in shas]
        doomed = [key(i["pk"]["S"], i["sk"]["S"]) for items in found for i in items]
        self.state.batch_write(deletes=doomed)
        return len(doomed)

    def count(self, shas: Iterable[str]) -> int:
        """Vectors held for these contents (all models): what erasure must leave at zero."""
        return sum(1 for s in dict.fromkeys(shas) for _ in self.state.query(f"emb#{s}"))

    def __len__(self) -> int:  # no cheap count in DynamoDB; callers use count(shas)
        raise TypeError("the DynamoDB embedding cache has no length; use count(shas)")

    def close(self) -> None:
        pass

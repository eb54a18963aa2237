"""Read caches of the AgentCore store: where a record lives, and overflow blobs by hash.

Both are bounded LRU maps behind one lock (the store reads from a small thread pool).
A location is immutable while the record lives; a stale one fails the store's check and is
forgotten. A blob is named by its content hash, so it never goes stale.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

LOCATION_CACHE = 200_000  # our key -> (memoryRecordId, namespace) entries kept for reads
BLOB_CACHE = 20_000  # overflow blobs kept by hash


class ReadCache:
    def __init__(self, locations: int = LOCATION_CACHE, blobs: int = BLOB_CACHE):
        self._where: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._blobs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._max_where = locations
        self._max_blobs = blobs
        self.lock = threading.Lock()

    def locations(self, keys: Iterable[str]) -> dict[str, tuple[str, str]]:
        """key -> (memoryRecordId, namespace) for the keys whose location is known."""
        with self.lock:
            return {k: self._where[k] for k in keys if k in self._where}

    def remember(self, key: str, memory_record_id: str, namespace: str) -> None:
        with self.lock:
            self._where[key] = (memory_record_id, namespace)
            self._where.move_to_end(key)
            while len(self._where) > self._max_where:
                self._where.popitem(last=False)

    def forget(self, keys: Sequence[str]) -> None:
        with self.lock:
            for k in keys:
                self._where.pop(k, None)

    def blob(self, digest: str) -> dict[str, Any] | None:
        with self.lock:
            return self._blobs.get(digest)

    def remember_blobs(self, blobs: dict[str, dict[str, Any]]) -> None:
        if not blobs:
            return
        with self.lock:
            for h, blob in blobs.items():
                self._blobs[h] = blob
                self._blobs.move_to_end(h)
            while len(self._blobs) > self._max_blobs:
                self._blobs.popitem(last=False)

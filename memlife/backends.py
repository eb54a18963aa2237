"""Which backend holds each part of the run state, chosen in one place.

The embedded default keeps every part in the SQLite store's own file (or under
MEMLIFE_HOME for other stores); with ``MEMLIFE_STATE=dynamodb://...`` a non-SQLite store
keeps them in the AWS state backend (memlife/state/). The parts' modules (embed_cache,
ledger, journal, ...) define the protocol and the local implementation and never import
a backend; this module imports both sides and nothing below it imports it back, so the
choice adds no import circle.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from memlife.embed import Embedder
from memlife.embed_cache import EmbeddingCache
from memlife.ledger import AccessLedger
from memlife.state import current, uses_remote_state


def embedding_cache(store: object, embedder: Embedder | None = None, **kw: Any) -> EmbeddingCache:
    """Share a SqliteStore's file; any other store gets the state backend's cache
    ($MEMLIFE_STATE, memlife/state/embeddings.py) or else the cache's own file."""
    conn = getattr(store, "connection", None)
    if isinstance(conn, sqlite3.Connection):
        return EmbeddingCache(embedder, connection=conn, lock=getattr(store, "lock", None), **kw)
    remote = uses_remote_state(store)
    if remote is not None:
        from memlife.state.embeddings import DynamoEmbeddingCache

        return DynamoEmbeddingCache(remote, embedder, **kw)
    return EmbeddingCache(embedder, **kw)


def open_ledger(root: str | Path | None = None, store: object = None, **kw: Any) -> AccessLedger:
    """A folder when ``root`` is given; else on S3 when $MEMLIFE_STATE names one (and the
    store is not the embedded SQLite one); else ``$MEMLIFE_HOME/ledger``."""
    if root is None:
        remote = uses_remote_state(store) if store is not None else current()
        if remote is not None:
            from memlife.state.ledger import S3AccessLedger

            return S3AccessLedger(remote, **kw)
    return AccessLedger(root, **kw)

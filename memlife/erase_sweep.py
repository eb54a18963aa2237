"""A dry run racing an erasure: what it cached from an erased record is dropped again.

A dry run takes no lease (it writes nothing to the store), so an erasure may run while it
plans. The erasure drops the erased records' vectors and derived rows (memlife/derived.py:
an inferred subject key holds a few content words) from every cache it knows; a dry run
that read those records just before the erasure could write them back just after.

The erasure commits its tombstones before it drops anything, so the dry run checks
AFTER each write: whatever the two interleave, either the erasure's drop comes after the
dry run's write, or the tombstone is already there when the dry run looks. Write, then
look, never the other way round.

Only recent tombstones are looked at (an erasure that began up to RECENT before the run
started can still be dropping): an older one was settled before the run read anything.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from memlife.consolidate import answers
from memlife.derived import derived_for
from memlife.embed_cache import EmbeddingCache
from memlife.sql_in import in_chunks
from memlife.stores.base import MemoryStore
from memlife.stores.sqlite import SqliteStore

RECENT = timedelta(days=1)


def recent_tombstones(
    store: MemoryStore, actors: Iterable[str], since: datetime
) -> list[tuple[str, str]]:
    """(actor_id, content_sha256) of tombstones written since ``since`` for these actors.
    SQLite-held tombstones only (the store's file or $MEMLIFE_HOME/tombstones.db); a remote
    state backend's are not swept (its window is documented in docs/evaluation.md)."""
    from memlife.tombstones import _backend

    backend = _backend(store)
    if not isinstance(backend, SqliteStore):
        return []
    out: list[tuple[str, str]] = []
    with backend.lock:
        con = backend.connection
        if con.execute("SELECT 1 FROM tombstones LIMIT 1").fetchone() is None:
            return []
        for qs, chunk in in_chunks(sorted(set(actors))):
            q = (
                "SELECT actor_id, content_sha256 FROM tombstones "
                f"WHERE actor_id IN ({qs}) AND erased_at >= ?"
            )
            out += con.execute(q, [*chunk, since.astimezone(UTC).isoformat()]).fetchall()
    return out


def sweep_after_write(
    store: MemoryStore, cache: EmbeddingCache | None, actors: Iterable[str], started: datetime
) -> int:
    """Call after the dry run's cache writes for these actors: drops the vectors of
    recently erased content and every derived row of an actor with a recent erasure
    (the tombstone names no namespace; the row is only a cache). Returns rows dropped."""
    if cache is None:
        return 0
    found = recent_tombstones(store, actors, started - RECENT)
    if not found:
        return 0
    dropped = cache.delete_for([sha for _, sha in found])
    derived = derived_for(cache)
    if derived is not None:
        dropped += derived.forget_actors({actor for actor, _ in found})
    conn = getattr(cache, "connection", None)
    if isinstance(conn, sqlite3.Connection):  # the model answers it kept hold words
        dropped += answers.forget_actors(conn, cache.lock, {actor for actor, _ in found})
    if dropped:  # secure_delete zeroed the rows; fold the WAL that still holds them
        cache.fold_wal()
    return dropped

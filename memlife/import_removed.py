"""Records an import brought back after a receipted removal: reported, not refused.

A record the night deleted, a reviewer deleted or a purge removed, each with a receipt,
comes back when the same file is imported again. Its receipts then say "deleted" of a
record that is there (`receipts verify` of that run reports DELETED_RECORD_PRESENT), and
nothing at the import said so (session 30 operator review). Erased content is refused
(tombstones); a restore after a wrong deletion is a fair use of import, so these are
warnings: `PREVIOUSLY_DELETED`, naming the run. The same id holding other content is a
reused id (as verify reads it: RECORD_ID_REUSED), not a return. SQLite stores only: their
journal is in the same file, so one query finds them.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from memlife.journal import OpKind, OpState, Outcome
from memlife.stores.base import MemoryStore
from memlife.stores.sqlite import SqliteStore

_REMOVALS = (OpKind.delete.value, OpKind.purge.value, OpKind.erase.value)
_DONE = (OpState.APPLIED.value, OpState.RECEIPTED.value)


def rowid_mark(store: MemoryStore) -> int | None:
    """The records table's highest rowid before an import: rows above it are the import's."""
    if not isinstance(store, SqliteStore):
        return None
    (mark,) = store.connection.execute("SELECT coalesce(max(rowid), 0) FROM records").fetchone()
    return int(mark)


def brought_back(store: MemoryStore, mark: int | None) -> list[dict[str, Any]]:
    """Warnings for the rows written since ``mark`` that a receipted removal had taken out
    with the same content: one per record, naming the latest such run."""
    if mark is None or not isinstance(store, SqliteStore):
        return []
    kinds, states = ",".join("?" * len(_REMOVALS)), ",".join("?" * len(_DONE))
    try:
        rows = store.connection.execute(
            # SQLite takes a bare column from the row of the max(): the latest removal's run
            f"SELECT r.id, o.run_id, max(o.updated_at) FROM records r "
            f"JOIN operations o ON o.record_id = r.id "
            f"WHERE r.rowid > ? AND o.kind IN ({kinds}) AND o.state IN ({states}) "
            "AND o.outcome = ? AND o.content_sha256 = r.content_sha256 "
            "AND o.actor_id = r.actor_id GROUP BY r.id ORDER BY r.id",
            (mark, *_REMOVALS, *_DONE, Outcome.deleted.value),
        ).fetchall()
    except sqlite3.OperationalError:  # no journal yet: nothing was ever removed here
        return []
    return [{"line": None, "id": rid, "field": "id", "code": "PREVIOUSLY_DELETED", "run_id": run}
            for rid, run, _ in rows]  # fmt: skip

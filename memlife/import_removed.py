"""Records an import brought back after a receipted removal: reported, not refused.

A record the night deleted, a reviewer deleted or a purge removed, each with a receipt,
comes back when the same file is imported again. Its receipts then say "deleted" of a
record that is there (`receipts verify` of that run reports DELETED_RECORD_PRESENT), and
nothing at the import said so (session 30 operator review). Erased content is refused
(tombstones); a restore after a wrong deletion is a fair use of import, so these are
warnings: `PREVIOUSLY_DELETED`, naming the run. The same id holding other content is a
reused id (as verify reads it: RECORD_ID_REUSED), not a return. SQLite stores only: their
journal is in the same file, so one query finds them.

Lines the import finds unchanged are asked too (:func:`unchanged_back`, per batch): an
import killed part-way stored them and died before it could warn, and its rerun, which
finishes it, must report what the whole import reports (audit 49i).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from memlife.journal import OpKind, OpState, Outcome
from memlife.sql_in import in_chunks
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
    return _removed(store, "r.rowid > ?", [mark])


def unchanged_back(store: MemoryStore, ids: list[str]) -> list[dict[str, Any]]:
    """:func:`brought_back`'s warnings for records the import found stored as its lines say
    (``ids``): a killed run of the same import may have written them."""
    if not ids or not isinstance(store, SqliteStore):
        return []
    out: list[dict[str, Any]] = []
    for qs, chunk in in_chunks(ids):
        out += _removed(store, f"r.id IN ({qs})", chunk)
    return out


def with_brought_back(
    store: MemoryStore, mark: int | None, warnings: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``warnings`` with this import's PREVIOUSLY_DELETED last, once a record and by id,
    whether the record was written now or found unchanged (a rerun reports as a whole run)."""
    back = {w["id"]: w for w in warnings if w["code"] == "PREVIOUSLY_DELETED"}
    back.update((w["id"], w) for w in brought_back(store, mark))
    rest = [w for w in warnings if w["code"] != "PREVIOUSLY_DELETED"]
    return rest + [back[rid] for rid in sorted(back)]


def _removed(store: SqliteStore, where: str, args: list[Any]) -> list[dict[str, Any]]:
    kinds, states = ",".join("?" * len(_REMOVALS)), ",".join("?" * len(_DONE))
    try:
        rows = store.connection.execute(
            # SQLite takes a bare column from the row of the max(): the latest removal's run
            f"SELECT r.id, o.run_id, max(o.updated_at) FROM records r "
            f"JOIN operations o ON o.record_id = r.id "
            f"WHERE {where} AND o.kind IN ({kinds}) AND o.state IN ({states}) "
            "AND o.outcome = ? AND o.content_sha256 = r.content_sha256 "
            "AND o.actor_id = r.actor_id GROUP BY r.id ORDER BY r.id",
            (*args, *_REMOVALS, *_DONE, Outcome.deleted.value),
        ).fetchall()
    except sqlite3.OperationalError:  # no journal yet: nothing was ever removed here
        return []
    return [{"line": None, "id": rid, "field": "id", "code": "PREVIOUSLY_DELETED", "run_id": run}
            for rid, run, _ in rows]  # fmt: skip

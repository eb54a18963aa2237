"""Inferred subjects in SQLite: the store's own file, else ``$MEMLIFE_HOME/inferred.db``."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from memlife.model import utcnow
from memlife.sql_in import in_chunks

SCHEMA = """
CREATE TABLE IF NOT EXISTS inferred_subjects (
    record_id TEXT PRIMARY KEY,
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    subject TEXT NOT NULL,
    how TEXT NOT NULL,          -- 'nightly' or 'remember'
    assigned_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS inferred_subjects_shard ON inferred_subjects (actor_id, namespace);
"""
TABLE = "inferred_subjects"
FILENAME = "inferred.db"


class SqliteSubjects:
    def __init__(
        self, connection: sqlite3.Connection, lock: AbstractContextManager[Any] | None = None
    ) -> None:
        self.connection = connection
        self.lock: AbstractContextManager[Any] = lock if lock is not None else nullcontext()
        # a dry run on a store without the table reads an empty in-memory copy that only
        # this object writes: no query per shard while it stays empty
        with self.lock:
            memory = connection.execute("PRAGMA database_list").fetchone()[2] == ""
            self._empty = (
                memory
                and connection.execute("SELECT 1 FROM inferred_subjects LIMIT 1").fetchone() is None
            )

    def get(self, shard: tuple[str, str], ids: Sequence[str]) -> dict[str, str]:
        if self._empty:
            return {}
        out: dict[str, str] = {}
        with self.lock:
            for qs, chunk in in_chunks(ids):
                q = (
                    "SELECT record_id, subject FROM inferred_subjects "
                    f"WHERE actor_id = ? AND namespace = ? AND record_id IN ({qs})"
                )
                out.update(self.connection.execute(q, [*shard, *chunk]).fetchall())
        return out

    def put(self, actor_id: str, namespace: str, subjects: Mapping[str, str], how: str) -> None:
        now = utcnow().isoformat()
        rows = [(rid, actor_id, namespace, subj, how, now) for rid, subj in subjects.items()]
        self._empty = False
        with self.lock:
            self.connection.executemany(
                "INSERT INTO inferred_subjects VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(record_id) DO UPDATE SET actor_id = excluded.actor_id, "
                "namespace = excluded.namespace, subject = excluded.subject, "
                "how = excluded.how, assigned_at = excluded.assigned_at "
                "WHERE inferred_subjects.actor_id != excluded.actor_id "
                "OR inferred_subjects.namespace != excluded.namespace",  # a reused id's old row
                rows,
            )

    def forget(self, ids: Sequence[str], shard: tuple[str, str] | None = None) -> int:
        scope, args = ("", []) if shard is None else ("actor_id = ? AND namespace = ? AND ", shard)
        n = 0
        with self.lock:
            for qs, chunk in in_chunks(ids):
                cur = self.connection.execute(
                    f"DELETE FROM inferred_subjects WHERE {scope}record_id IN ({qs})",
                    [*args, *chunk],
                )
                n += cur.rowcount
        return n

    def forget_keys(self, shard: tuple[str, str], keys: Collection[str]) -> int:
        n = 0
        with self.lock:
            for qs, chunk in in_chunks(sorted(keys)):
                q = (
                    "DELETE FROM inferred_subjects "
                    f"WHERE actor_id = ? AND namespace = ? AND subject IN ({qs})"
                )
                n += self.connection.execute(q, [*shard, *chunk]).rowcount
        return n

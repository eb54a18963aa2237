"""Inferred subjects, stored as inferred: a side table beside the store, never the record.

A record whose ``subject`` a person (or the importing system) gave keeps it; a record
without one gets a key from :func:`memlife.group.infer_subjects` at ``remember`` time or
in the nightly run, kept here so it never moves between nights. Because the record's own
``subject`` stays empty, a subject given later by a person simply wins.

The key is made of a few content words (for the reviewer) and a short hash: erasure
must call :meth:`InferredSubjects.forget` with the erased ids.

The table lives in the store's SQLite file (one backup, one erasure covers both), else
in ``$MEMLIFE_HOME/inferred.db``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from memlife.model import PlanView, Status, utcnow

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
_CHUNK = 500


class InferredSubjects:
    def __init__(
        self, connection: sqlite3.Connection, lock: AbstractContextManager[Any] | None = None,
        *, create: bool = True,
    ) -> None:  # fmt: skip
        self.connection = connection
        self.lock: AbstractContextManager[Any] = lock if lock is not None else nullcontext()
        with self.lock:
            if create:
                self.connection.executescript(SCHEMA)
            else:  # a dry run: read what exists, create nothing in the store's file
                q = "SELECT 1 FROM sqlite_master WHERE type='table' AND name='inferred_subjects'"
                if self.connection.execute(q).fetchone() is None:
                    self.connection = sqlite3.connect(":memory:", check_same_thread=False,
                                                      isolation_level=None)  # fmt: skip
                    self.connection.executescript(SCHEMA)

    @classmethod
    def for_store(cls, store: object, *, create: bool = True) -> InferredSubjects:
        conn = getattr(store, "connection", None)
        if isinstance(conn, sqlite3.Connection):
            return cls(conn, getattr(store, "lock", None), create=create)
        path = Path(os.environ.get("MEMLIFE_HOME", ".memlife")) / "inferred.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        own = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        return cls(own, threading.RLock(), create=create)

    def get(self, ids: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        with self.lock:
            for i in range(0, len(ids), _CHUNK):
                chunk = list(ids[i : i + _CHUNK])
                q = f"SELECT record_id, subject FROM inferred_subjects WHERE record_id IN ({','.join('?' * len(chunk))})"
                out.update(self.connection.execute(q, chunk).fetchall())
        return out

    def put(self, actor_id: str, namespace: str, subjects: Mapping[str, str], how: str) -> None:
        """Insert new keys; an existing key is never overwritten (keys do not move)."""
        if not subjects:
            return
        now = utcnow().isoformat()
        rows = [(rid, actor_id, namespace, subj, how, now) for rid, subj in subjects.items()]
        with self.lock:
            self.connection.executemany(
                "INSERT OR IGNORE INTO inferred_subjects VALUES (?, ?, ?, ?, ?, ?)", rows
            )

    def forget(self, ids: Sequence[str]) -> int:
        n = 0
        with self.lock:
            for i in range(0, len(ids), _CHUNK):
                chunk = list(ids[i : i + _CHUNK])
                cur = self.connection.execute(
                    f"DELETE FROM inferred_subjects WHERE record_id IN ({','.join('?' * len(chunk))})",
                    chunk,
                )
                n += cur.rowcount
        return n


def needs_inference(views: Sequence[PlanView]) -> list[str]:
    """Ids of active records that carry no subject of their own."""
    return [
        v.id for v in views if v.status == Status.active and not (v.subject and v.subject.strip())
    ]

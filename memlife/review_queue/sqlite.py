"""Review items in SQLite: the store's own file, else ``$MEMLIFE_HOME/reviews.db``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from memlife.review_queue.base import COLUMNS, RENEWED, WAITING, Carried, Renewal, ReviewItem
from memlife.sql_in import in_chunks, marks
from memlife.sqlite_open import rollback

SCHEMA = """
CREATE TABLE IF NOT EXISTS review_items (
    item_id TEXT PRIMARY KEY,
    record_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    pair_id TEXT,
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    memory_type TEXT,
    owner TEXT,
    priority REAL NOT NULL,
    state TEXT NOT NULL,          -- open | disputed | resolved | waiting
    decision TEXT,
    reviewer TEXT,
    nights INTEGER NOT NULL,
    opened_run TEXT NOT NULL,
    opened_at TEXT NOT NULL,
    last_seen_run TEXT NOT NULL,
    last_seen_at TEXT NOT NULL,
    resolved_at TEXT,
    operation_id TEXT,
    content_sha256 TEXT,          -- the record's content the finding is about (NULL: unknown)
    first_seen_at TEXT            -- when a night first found the finding (NULL: not kept then)
);
CREATE INDEX IF NOT EXISTS review_items_record ON review_items (record_id);
CREATE INDEX IF NOT EXISTS review_items_state ON review_items (state, actor_id, namespace);
"""
TABLE = "review_items"
FILENAME = "reviews.db"
# columns added after the first schema: (name, SQL type); a table of before gets them with
# ALTER TABLE (NULL for the items it holds), or, read-only (a dry run), reads them as NULL
ADDED = (("content_sha256", "TEXT"), ("first_seen_at", "TEXT"))


class SqliteReviews:
    def __init__(
        self, connection: sqlite3.Connection, lock: AbstractContextManager[Any] | None = None,
        *, migrate: bool = True,
    ) -> None:  # fmt: skip
        self.connection = connection
        self.lock: AbstractContextManager[Any] = lock if lock is not None else nullcontext()
        with self.lock:
            have = {r[1] for r in connection.execute(f"PRAGMA table_info({TABLE})")}
            for name, sql_type in ADDED:
                if name in have or not migrate:
                    continue
                try:
                    connection.execute(f"ALTER TABLE {TABLE} ADD COLUMN {name} {sql_type}")
                except sqlite3.OperationalError as exc:  # another process added it first
                    if "duplicate column" not in str(exc):
                        raise
                have.add(name)
        self._select_list = ", ".join(c if c in have else f"NULL AS {c}" for c in COLUMNS)

    def _select(self, where: str, args: Sequence[Any]) -> list[ReviewItem]:
        q = f"SELECT {self._select_list} FROM review_items WHERE {where}"
        with self.lock:
            return [ReviewItem(*row) for row in self.connection.execute(q, list(args))]

    def get_many(self, ids: Sequence[str]) -> dict[str, ReviewItem]:
        out: dict[str, ReviewItem] = {}
        for qs, chunk in in_chunks(ids):
            for item in self._select(f"item_id IN ({qs})", chunk):
                out[item.item_id] = item
        return out

    def list(self, states: Iterable[str]) -> list[ReviewItem]:
        states = [*states]
        return self._select(f"state IN ({marks(len(states))})", states)

    def disputed(self, actor_id: str, namespace: str) -> frozenset[str]:
        with self.lock:
            rows = self.connection.execute(
                "SELECT record_id FROM review_items WHERE state='disputed' AND actor_id=? "
                "AND namespace=?", (actor_id, namespace),
            ).fetchall()  # fmt: skip
        return frozenset(r[0] for r in rows)

    def write_night(self, carried: Sequence[Carried], opened: Sequence[ReviewItem], run_id: str,
                    at: str, renewed: Sequence[Renewal] = (),
                    moved: Sequence[ReviewItem] = (), dropped: Sequence[str] = ()) -> None:  # fmt: skip
        with self.lock:
            conn = self.connection
            own = not conn.in_transaction  # inside the store's transaction: join it
            if own:
                conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "UPDATE review_items SET nights=nights+1, last_seen_run=?, last_seen_at=?, "
                    "content_sha256=COALESCE(content_sha256, ?) "
                    "WHERE item_id=? AND last_seen_run<>? AND state<>'resolved'",
                    [(run_id, at, sha, i, run_id) for i, sha in carried],
                )
                conn.executemany(
                    f"INSERT OR IGNORE INTO review_items ({', '.join(COLUMNS)}) "
                    f"VALUES ({','.join('?' * len(COLUMNS))})",
                    [tuple(getattr(item, c) for c in COLUMNS) for item in opened],
                )
                conn.executemany(
                    f"UPDATE review_items SET {', '.join(f'{c}=?' for c in RENEWED)} "
                    "WHERE item_id=? AND state<>'resolved' AND content_sha256=?",
                    [(*(getattr(item, c) for c in RENEWED), item.item_id, old)
                     for old, item in renewed],
                )  # fmt: skip
                rest = [c for c in COLUMNS if c != "item_id"]
                conn.executemany(
                    f"UPDATE review_items SET {', '.join(f'{c}=?' for c in rest)} "
                    f"WHERE item_id=? AND state='{WAITING}'",
                    [(*(getattr(item, c) for c in rest), item.item_id) for item in moved],
                )
                conn.executemany(
                    f"DELETE FROM review_items WHERE item_id=? AND state='{WAITING}'",
                    [(i,) for i in dropped],
                )
            except BaseException:
                if own:
                    rollback(conn)  # perhaps rolled back by SQLite (a full disk)
                raise
            if own:
                conn.execute("COMMIT")

    def close(self, iid: str, *, state: str, decision: str, reviewer: str,
              resolved_at: str | None, operation_id: str | None) -> bool:  # fmt: skip
        with self.lock:
            cur = self.connection.execute(  # an erased record's owner goes with it
                "UPDATE review_items SET state=?, decision=?, reviewer=?, resolved_at=?, "
                "operation_id=?, owner=CASE WHEN ?='erased' THEN NULL ELSE owner END "
                "WHERE item_id=? AND state<>'resolved'",
                (state, decision, reviewer, resolved_at, operation_id, decision, iid),
            )
        return cur.rowcount == 1

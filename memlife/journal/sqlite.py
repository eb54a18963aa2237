"""The journal in SQLite: the store's own file in the embedded default (one transaction scope)."""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memlife.journal.base import (
    SECRET_BYTES,
    GroupInReview,
    JournalStateError,
    MemoOutcome,
    Mover,
    Operation,
    OpState,
    Outcome,
    Rejection,
    check_move,
    checked_secret,
    stored,
)
from memlife.journal.sqlite_rows import COLS as _COLS
from memlife.journal.sqlite_rows import SELECT as _SELECT
from memlife.journal.sqlite_rows import row_of as _row
from memlife.journal.sqlite_rows import when as _dt
from memlife.model import utcnow
from memlife.sql_in import in_chunks
from memlife.sqlite_open import connect_wal, rollback

SCHEMA = """
CREATE TABLE IF NOT EXISTS operations (
    operation_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    record_id TEXT NOT NULL,
    reasons TEXT NOT NULL,
    policy_version TEXT NOT NULL,
    content_sha256 TEXT,
    replacement_id TEXT,
    state TEXT NOT NULL,
    outcome TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_retry_at TEXT,
    last_error TEXT,
    payload TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS operations_run ON operations (run_id);
CREATE INDEX IF NOT EXISTS operations_state ON operations (state, next_retry_at);
CREATE INDEX IF NOT EXISTS operations_record ON operations (record_id);
-- a random key made once per store: manual run ids are keyed by it (journal.base.Journal)
CREATE TABLE IF NOT EXISTS secrets (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
-- the lifecycle lease (memlife/lease.py): one writer per store
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    run_id TEXT NOT NULL,
    purpose TEXT NOT NULL,
    acquired_at TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
-- groups the consolidator's answer was rejected for (grounding, schema): back off, then review
CREATE TABLE IF NOT EXISTS consolidation_rejections (
    group_key TEXT PRIMARY KEY,   -- the consolidation key: members and their content hashes
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    last_code TEXT NOT NULL,
    next_attempt_at TEXT,         -- NULL: in review, no more automatic attempts
    updated_at TEXT NOT NULL
);
-- a group's settled outcome (kept apart, nothing to merge, refused, gate-blocked): keyed by the group's
-- members, their content hashes, the policy version and the consolidator, so an unchanged
-- group is not sent again and any change re-opens it under a new key (no content here)
CREATE TABLE IF NOT EXISTS consolidation_outcomes (
    memo_key TEXT PRIMARY KEY,
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    outcome TEXT NOT NULL,
    retry_at TEXT,                -- NULL: settled until a member changes
    updated_at TEXT NOT NULL
);
"""
# Columns added after the first release: (name, SQL type); added in place on open. A row
# written before ``moved_by`` existed reads None there (verify: the wall-clock fallback).
_ADDED = (("resolution", "TEXT"), ("resolved_at", "TEXT"), ("moved_by", "TEXT"),
          ("moved_after_receipts", "INTEGER"))  # fmt: skip
# Due: unfinished (PLANNED, APPLIED) or a retryable failure whose time has come. A
# terminal failure has no next_retry_at and never comes back by itself (invariant 10).
_DUE = (
    "(state IN ('PLANNED', 'APPLIED') OR "
    "(state='FAILED' AND next_retry_at IS NOT NULL AND next_retry_at<=?))"
)


class SqliteJournal:
    def __init__(self, connection: sqlite3.Connection, lock: threading.RLock | None = None):
        self.connection = connection
        self.lock = lock or threading.RLock()
        with self.lock:
            connection.executescript(SCHEMA)
            self._add_columns()

    def run_secret(self) -> bytes:
        with self.lock:
            self.connection.execute(
                "INSERT OR IGNORE INTO secrets VALUES ('run', ?)",
                (secrets.token_bytes(SECRET_BYTES),),
            )
            row = self.connection.execute("SELECT value FROM secrets WHERE name='run'").fetchone()
            return checked_secret(row[0], f"journal {db_file(self.connection)}")

    def _add_columns(self) -> None:
        """Columns an older file lacks, added in one write transaction: read and added
        under the same lock, so two processes opening the file at once add each once."""
        c = self.connection
        if {n for n, _ in _ADDED} <= {r[1] for r in c.execute("PRAGMA table_info(operations)")}:
            return
        c.execute("BEGIN IMMEDIATE")
        try:
            have = {r[1] for r in c.execute("PRAGMA table_info(operations)")}
            for name, sql_type in _ADDED:
                if name not in have:
                    c.execute(f"ALTER TABLE operations ADD COLUMN {name} {sql_type}")
            c.execute("COMMIT")
        except BaseException:
            rollback(c)  # SQLite may have rolled back already (a full disk)
            raise

    @classmethod
    def at(cls, path: str | Path) -> SqliteJournal:
        """A journal in its own file (stores that are not SQLite, e.g. AgentCore)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = connect_wal(path)
        conn.execute("PRAGMA secure_delete=ON")
        return cls(conn)

    def plan(self, ops: Sequence[Operation]) -> list[Operation]:
        now = utcnow().isoformat()
        with self.lock:
            self.connection.execute("BEGIN IMMEDIATE")
            try:
                for op in ops:
                    self.connection.execute(
                        f"INSERT OR IGNORE INTO operations ({', '.join(_COLS)}) "
                        f"VALUES ({', '.join('?' * len(_COLS))})",
                        (
                            op.operation_id,
                            op.run_id,
                            op.kind.value,
                            op.actor_id,
                            op.namespace,
                            op.record_id,
                            json.dumps(op.reasons),
                            op.policy_version,
                            op.content_sha256,
                            op.replacement_id,
                            OpState.PLANNED.value,
                            None,
                            0,
                            None,
                            None,
                            op.payload,
                            now,
                            now,
                        ),  # fmt: skip
                    )
                self.connection.execute("COMMIT")
            except BaseException:
                rollback(self.connection)  # perhaps rolled back by SQLite (a full disk)
                raise
            return [stored(self.get(op.operation_id), op.operation_id) for op in ops]

    def get(self, operation_id: str) -> Operation | None:
        with self.lock:
            row = self.connection.execute(
                f"{_SELECT} WHERE operation_id=?", (operation_id,)
            ).fetchone()
        return _row(row) if row else None

    def transition(
        self,
        operation_id: str,
        to: OpState,
        *,
        outcome: Outcome | None = None,
        error: str | None = None,
        next_retry_at: datetime | None = None,
        at: datetime | None = None,
        by: Mover | None = None,
    ) -> Operation:
        with self.lock:
            op = self.get(operation_id)
            if op is None:
                raise JournalStateError(f"{operation_id}: no such operation")
            check_move(op, to, outcome)
            attempts = op.attempts + (1 if to in (OpState.APPLIED, OpState.FAILED) else 0)
            # A receipted operation no longer needs its payload (which may hold content).
            payload_sql = ", payload=NULL" if to is OpState.RECEIPTED else ""
            if to is OpState.FAILED:  # a new failure: any earlier operator decision is spent
                payload_sql += ", resolution=NULL, resolved_at=NULL"
            # only from the state read: another writer's move since (a writer paused past
            # its lease) is not undone (RECEIPTED -> APPLIED would make it due again)
            cur = self.connection.execute(
                f"UPDATE operations SET state=?, outcome=COALESCE(?, outcome), attempts=?, "
                f"next_retry_at=?, last_error=?, updated_at=?, moved_by=?, moved_after_receipts=?"
                f"{payload_sql} WHERE operation_id=? AND state=? AND attempts=?",
                (
                    to.value,
                    outcome.value if outcome else None,
                    attempts,
                    next_retry_at.isoformat() if next_retry_at else None,
                    error,
                    (at or utcnow()).isoformat(),
                    by.run_id if by else None,
                    by.after_receipts if by else None,
                    operation_id,
                    op.state.value,
                    op.attempts,
                ),  # fmt: skip
            )
            if cur.rowcount != 1:
                raise JournalStateError(f"{operation_id}: changed by another writer")
        return stored(self.get(operation_id), operation_id)

    def by_run(self, run_id: str) -> list[Operation]:
        with self.lock:
            rows = self.connection.execute(
                f"{_SELECT} WHERE run_id=? ORDER BY operation_id", (run_id,)
            ).fetchall()
        return [_row(r) for r in rows]

    def due(self, now: datetime, limit: int = 10_000) -> list[Operation]:
        """The first ``limit`` due operations (tests, quick looks); resume uses due_pages."""
        out: list[Operation] = []
        for page in self.due_pages(now, min(limit, 1000)):
            out += page
            if len(out) >= limit:
                return out[:limit]
        return out

    def due_pages(self, now: datetime, page_size: int = 1000) -> Iterator[list[Operation]]:
        """Every due operation, page by page (keyset on created_at, operation_id): an
        operation processed meanwhile is simply not seen again, none is starved."""
        after = ("", "")
        while True:
            with self.lock:
                rows = self.connection.execute(
                    f"{_SELECT} WHERE {_DUE} AND (created_at, operation_id) > (?, ?) "
                    "ORDER BY created_at, operation_id LIMIT ?",
                    (now.isoformat(), *after, page_size),
                ).fetchall()
            if not rows:
                return
            page = [_row(r) for r in rows]
            yield page
            after = (rows[-1][16], rows[-1][0])

    def terminal_failures(self, include_resolved: bool = False) -> list[Operation]:
        """FAILED with no next retry: an operator decides (``memlife ops failed``)."""
        sql = f"{_SELECT} WHERE state='FAILED' AND next_retry_at IS NULL"
        if not include_resolved:
            sql += " AND resolution IS NULL"
        with self.lock:
            rows = self.connection.execute(sql + " ORDER BY updated_at, operation_id").fetchall()
        return [_row(r) for r in rows]

    def resolve(self, operation_id: str, resolution: str, at: datetime | None = None,
                retry_at: datetime | None = None) -> Operation:  # fmt: skip
        """An operator's decision on a terminal failure: ``requeued`` (due again at
        ``retry_at``: the cause is fixed) or ``dismissed`` (left as it is, on record)."""
        with self.lock:
            op = self.get(operation_id)
            if op is None or op.state is not OpState.FAILED or op.next_retry_at is not None:
                raise JournalStateError(f"{operation_id}: not a terminal failure")
            when = (at or utcnow()).isoformat()
            # still a terminal failure when written, as DynamoDB's write is conditional: a
            # stale dismiss undid another operator's requeue, or ended for good a failure
            # the night had retried since (another process: the lock is this one's only)
            cur = self.connection.execute(
                "UPDATE operations SET resolution=?, resolved_at=?, next_retry_at=? "
                "WHERE operation_id=? AND state='FAILED' AND next_retry_at IS NULL",
                (resolution, when, retry_at.isoformat() if retry_at else None, operation_id),
            )
            if cur.rowcount != 1:
                raise JournalStateError(f"{operation_id}: not a terminal failure")
        return stored(self.get(operation_id), operation_id)

    # -- the lifecycle lease (memlife/lease.py) ------------------------------------------------
    def lease_acquire(self, name: str, owner: str, run_id: str, purpose: str, now: datetime,
                      expires: datetime, takeover: str | None = None) -> tuple[bool, dict[str, Any] | None]:  # fmt: skip
        keys = ("owner", "run_id", "purpose", "acquired_at", "heartbeat_at", "expires_at")
        with self.lock:
            self.connection.execute("BEGIN IMMEDIATE")  # one decision at a time, across processes
            try:
                row = self.connection.execute(
                    f"SELECT {', '.join(keys)} FROM leases WHERE name=?", (name,)
                ).fetchone()
                holder = dict(zip(keys, row, strict=True)) if row else None
                live = holder and holder["expires_at"] > now.isoformat()
                if holder and holder["owner"] not in (owner, takeover) and live:
                    self.connection.execute("COMMIT")
                    return False, holder
                self.connection.execute(
                    "INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (name, owner, run_id, purpose, now.isoformat(), now.isoformat(), expires.isoformat()),
                )  # fmt: skip
                self.connection.execute("COMMIT")
            except BaseException:
                rollback(self.connection)  # perhaps rolled back by SQLite (a full disk)
                raise
        return True, holder if holder and holder["owner"] != owner else None

    def lease_renew(self, name: str, owner: str, now: datetime, expires: datetime,
                    run_id: str | None = None) -> bool:  # fmt: skip
        with self.lock:
            cur = self.connection.execute(
                "UPDATE leases SET heartbeat_at=?, expires_at=?, run_id=COALESCE(?, run_id) "
                "WHERE name=? AND owner=?",
                (now.isoformat(), expires.isoformat(), run_id, name, owner),
            )
        return cur.rowcount == 1

    def lease_release(self, name: str, owner: str) -> None:
        with self.lock:
            self.connection.execute("DELETE FROM leases WHERE name=? AND owner=?", (name, owner))

    # -- consolidation rejections (a group's backoff, then review) ---------------------------
    def rejection(self, group_key: str) -> Rejection | None:
        with self.lock:
            row = self.connection.execute(
                "SELECT attempts, last_code, next_attempt_at FROM consolidation_rejections "
                "WHERE group_key=?", (group_key,),
            ).fetchone()  # fmt: skip
        if row is None:
            return None
        return Rejection(attempts=row[0], code=row[1], next_attempt_at=_dt(row[2]))

    def reject(self, group_key: str, actor_id: str, namespace: str, code: str,
               next_attempt_at: datetime | None, at: datetime) -> None:  # fmt: skip
        with self.lock:
            self.connection.execute(
                "INSERT INTO consolidation_rejections VALUES (?, ?, ?, 1, ?, ?, ?) "
                "ON CONFLICT (group_key) DO UPDATE SET attempts=attempts+1, last_code=excluded.last_code, "
                "next_attempt_at=excluded.next_attempt_at, updated_at=excluded.updated_at",
                (group_key, actor_id, namespace, code,
                 next_attempt_at.isoformat() if next_attempt_at else None, at.isoformat()),
            )  # fmt: skip

    def clear_rejection(self, group_key: str) -> None:
        with self.lock:
            self.connection.execute(
                "DELETE FROM consolidation_rejections WHERE group_key=?", (group_key,)
            )

    # -- consolidation outcomes (the memo: an unchanged group is not sent again) -------------
    def outcomes(self, memo_keys: Sequence[str]) -> dict[str, MemoOutcome]:
        return read_outcomes(self.connection, self.lock, memo_keys)

    def remember_outcome(self, memo_key: str, actor_id: str, namespace: str, outcome: str,
                         retry_at: datetime | None, at: datetime) -> None:  # fmt: skip
        with self.lock:
            self.connection.execute(
                "INSERT INTO consolidation_outcomes VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT "
                "(memo_key) DO UPDATE SET outcome=excluded.outcome, retry_at=excluded.retry_at, "
                "updated_at=excluded.updated_at",
                (memo_key, actor_id, namespace, outcome,
                 retry_at.isoformat() if retry_at else None, at.isoformat()),
            )  # fmt: skip

    def forget_outcome(self, memo_key: str) -> None:
        with self.lock:
            self.connection.execute(
                "DELETE FROM consolidation_outcomes WHERE memo_key=?", (memo_key,)
            )

    def groups_in_review(self) -> list[GroupInReview]:
        with self.lock:
            rows = self.connection.execute(
                "SELECT group_key, actor_id, namespace, attempts, last_code, updated_at FROM "
                "consolidation_rejections WHERE next_attempt_at IS NULL ORDER BY updated_at"
            ).fetchall()
        return [
            GroupInReview(group_key=g, actor_id=a, namespace=ns, attempts=n, code=c, since=t)
            for g, a, ns, n, c, t in rows
        ]

    def for_record(self, record_id: str) -> list[Operation]:
        with self.lock:
            rows = self.connection.execute(
                f"{_SELECT} WHERE record_id=? OR replacement_id=?", (record_id, record_id)
            ).fetchall()
        return [_row(r) for r in rows]

    def for_records(self, record_ids: Sequence[str]) -> dict[str, list[Operation]]:
        return {rid: self.for_record(rid) for rid in dict.fromkeys(record_ids)}  # local reads

    def forget_payloads(self, record_ids: Sequence[str]) -> int:
        n = 0
        with self.lock:
            for rid in record_ids:
                # payloads are pydantic JSON (raw UTF-8); json.dumps escapes: look for both
                cur = self.connection.execute(
                    "UPDATE operations SET payload=NULL WHERE payload IS NOT NULL AND "
                    "(record_id=? OR replacement_id=? OR instr(payload, ?) > 0 "
                    "OR instr(payload, ?) > 0)",
                    (rid, rid, json.dumps(rid), json.dumps(rid, ensure_ascii=False)),
                )
                n += cur.rowcount
        return n


def read_outcomes(
    connection: sqlite3.Connection, lock: threading.RLock, memo_keys: Sequence[str]
) -> dict[str, MemoOutcome]:
    """``Journal.outcomes`` on a connection (also a read-only one: a dry run's memo reader)."""
    out: dict[str, MemoOutcome] = {}
    keys = list(dict.fromkeys(memo_keys))
    with lock:
        for qs, chunk in in_chunks(keys):
            rows = connection.execute(
                "SELECT memo_key, outcome, retry_at FROM consolidation_outcomes WHERE "
                f"memo_key IN ({qs})", chunk,
            ).fetchall()  # fmt: skip
            out.update({k: MemoOutcome(outcome=o, retry_at=_dt(r)) for k, o, r in rows})
    return out


def read_supersede_times(
    connection: sqlite3.Connection, lock: threading.RLock, record_ids: Sequence[str],
    scopes: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, datetime]:  # fmt: skip
    """When (wall clock) each record's latest supersede operation last moved, whatever its
    state: one that failed after the store wrote (a hand-over stopped) superseded it too,
    and a later time only delays a deletion. A connection without the journal knows none.
    ``scopes`` (id -> actor, namespace): only operations of that scope count. A reused id's
    earlier record, superseded on its own, is no supersede of this one: neither in another
    scope nor planned before the id's latest removal (delete, erase, purge) in this one."""
    out: dict[str, datetime] = {}
    with lock:
        if not has_table(connection, "operations"):
            return out
        for qs, chunk in in_chunks(list(dict.fromkeys(record_ids))):
            # a supersede planned before the id's latest removal in its scope was of the
            # record removed then, however late a retry moved it (audit 47a)
            rows = connection.execute(
                "SELECT record_id, actor_id, namespace, MAX(updated_at) FROM operations s "
                f"WHERE kind='supersede' AND record_id IN ({qs}) AND created_at > COALESCE(("
                "SELECT MAX(g.updated_at) FROM operations g WHERE g.record_id=s.record_id "
                "AND g.actor_id=s.actor_id AND g.namespace=s.namespace AND g.kind IN "
                "('delete', 'erase', 'purge') AND g.outcome IN ('deleted', 'already_absent')"
                "), '') GROUP BY record_id, actor_id, namespace",
                chunk,
            ).fetchall()  # fmt: skip
            for rid, actor, ns, at in rows:
                if at and (scopes is None or scopes.get(rid) == (actor, ns)):
                    when = datetime.fromisoformat(at)
                    out[rid] = max(out.get(rid, when), when)
    return out


def db_file(connection: sqlite3.Connection) -> str:
    """The file a connection's main database is (for messages; empty in memory)."""
    return str(connection.execute("PRAGMA database_list").fetchone()[2])


def has_table(connection: sqlite3.Connection, name: str) -> bool:
    found = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)
    ).fetchone()
    return found is not None

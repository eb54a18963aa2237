"""The journal in SQLite: the store's own file in the embedded default (one transaction scope)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from memlife.journal.base import (
    ALLOWED,
    JournalStateError,
    Operation,
    OpKind,
    OpState,
    Outcome,
)
from memlife.model import utcnow

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
"""
_COLS = (
    "operation_id", "run_id", "kind", "actor_id", "namespace", "record_id", "reasons",
    "policy_version", "content_sha256", "replacement_id", "state", "outcome", "attempts",
    "next_retry_at", "last_error", "payload", "created_at", "updated_at",
)  # fmt: skip
_SELECT = f"SELECT {', '.join(_COLS)} FROM operations"


def _dt(v: str | None) -> datetime | None:
    return datetime.fromisoformat(v) if v else None


def _row(row: tuple) -> Operation:
    return Operation(
        operation_id=row[0], run_id=row[1], kind=OpKind(row[2]), actor_id=row[3],
        namespace=row[4], record_id=row[5], reasons=json.loads(row[6]), policy_version=row[7],
        content_sha256=row[8], replacement_id=row[9], state=OpState(row[10]),
        outcome=Outcome(row[11]) if row[11] else None, attempts=row[12],
        next_retry_at=_dt(row[13]), last_error=row[14], payload=row[15],
        created_at=_dt(row[16]), updated_at=_dt(row[17]),
    )  # fmt: skip


class SqliteJournal:
    def __init__(self, connection: sqlite3.Connection, lock: threading.RLock | None = None):
        self.connection = connection
        self.lock = lock or threading.RLock()
        with self.lock:
            connection.executescript(SCHEMA)

    @classmethod
    def at(cls, path: str | Path) -> SqliteJournal:
        """A journal in its own file (stores that are not SQLite, e.g. AgentCore)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
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
                self.connection.execute("ROLLBACK")
                raise
            return [self.get(op.operation_id) for op in ops]  # type: ignore[misc]

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
    ) -> Operation:
        with self.lock:
            op = self.get(operation_id)
            if op is None:
                raise JournalStateError(f"{operation_id}: no such operation")
            if to not in ALLOWED[op.state]:
                raise JournalStateError(f"{operation_id}: {op.state} -> {to} is not allowed")
            attempts = op.attempts + (1 if to in (OpState.APPLIED, OpState.FAILED) else 0)
            # A receipted operation no longer needs its payload (which may hold content).
            payload_sql = ", payload=NULL" if to is OpState.RECEIPTED else ""
            self.connection.execute(
                f"UPDATE operations SET state=?, outcome=COALESCE(?, outcome), attempts=?, "
                f"next_retry_at=?, last_error=?, updated_at=?{payload_sql} WHERE operation_id=?",
                (
                    to.value,
                    outcome.value if outcome else None,
                    attempts,
                    next_retry_at.isoformat() if next_retry_at else None,
                    error,
                    (at or utcnow()).isoformat(),
                    operation_id,
                ),  # fmt: skip
            )
        return self.get(operation_id)  # type: ignore[return-value]

    def by_run(self, run_id: str) -> list[Operation]:
        with self.lock:
            rows = self.connection.execute(
                f"{_SELECT} WHERE run_id=? ORDER BY operation_id", (run_id,)
            ).fetchall()
        return [_row(r) for r in rows]

    def due(self, now: datetime, limit: int = 10_000) -> list[Operation]:
        with self.lock:
            rows = self.connection.execute(
                f"{_SELECT} WHERE (state='FAILED' AND (next_retry_at IS NULL OR next_retry_at<=?))"
                " OR state='APPLIED' OR state='PLANNED' ORDER BY created_at, operation_id LIMIT ?",
                (now.isoformat(), limit),
            ).fetchall()
        return [_row(r) for r in rows]

    def for_record(self, record_id: str) -> list[Operation]:
        with self.lock:
            rows = self.connection.execute(
                f"{_SELECT} WHERE record_id=? OR replacement_id=?", (record_id, record_id)
            ).fetchall()
        return [_row(r) for r in rows]

    def forget_payloads(self, record_ids: Sequence[str]) -> int:
        n = 0
        with self.lock:
            for rid in record_ids:
                cur = self.connection.execute(
                    "UPDATE operations SET payload=NULL WHERE payload IS NOT NULL AND "
                    "(record_id=? OR replacement_id=? OR instr(payload, ?) > 0)",
                    (rid, rid, json.dumps(rid)),
                )
                n += cur.rowcount
        return n

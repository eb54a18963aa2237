"""The operation journal (state machine in base.py; one backend per file)."""

from __future__ import annotations

from memlife.journal.base import (
    ALLOWED,
    Journal,
    JournalStateError,
    Operation,
    OpKind,
    OpState,
    Outcome,
    operation_id,
)
from memlife.journal.sqlite import SqliteJournal
from memlife.settings import settings

__all__ = [
    "ALLOWED",
    "Journal",
    "JournalStateError",
    "OpKind",
    "OpState",
    "Operation",
    "Outcome",
    "SqliteJournal",
    "open_journal",
    "operation_id",
]


def open_journal(store: object) -> Journal:
    """Beside the store: the same SQLite file for the embedded store; else the state backend
    of $MEMLIFE_STATE (DynamoDB), else its own file under $MEMLIFE_HOME (one machine only)."""
    conn = getattr(store, "connection", None)
    if conn is not None:
        return SqliteJournal(conn, getattr(store, "lock", None))
    from memlife.state import current

    remote = current()
    if remote is not None:
        from memlife.journal.dynamodb import DynamoJournal

        return remote.part("journal", DynamoJournal)
    return SqliteJournal.at(settings().home / "journal.db")

"""SQLite side tables of the embedded state: in the store's own file, else under MEMLIFE_HOME.

The review queue, the inferred subjects and the quarantine side tables all live beside
the store the same way (one backup and one erasure cover both when the store is SQLite);
this is that one piece of setup. With ``MEMLIFE_STATE=dynamodb://…`` non-SQLite stores use
the DynamoDB backends instead and nothing is opened here.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from memlife.settings import settings

Side = tuple[sqlite3.Connection, AbstractContextManager[Any]]


def _memory(schema: str) -> Side:
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    conn.executescript(schema)
    return conn, threading.RLock()


def side_connection(store: object, filename: str, schema: str, table: str, *,
                    create: bool = True) -> Side:  # fmt: skip
    """(connection, lock) holding ``schema``: the store's SQLite file when it has one, else
    ``$MEMLIFE_HOME/filename``. ``create=False`` (a dry run) reads what exists and creates
    nothing: where ``table`` is missing it gets an empty in-memory table instead."""
    conn = getattr(store, "connection", None)
    if isinstance(conn, sqlite3.Connection):
        lock = getattr(store, "lock", None)
        ctx: AbstractContextManager[Any] = lock if lock is not None else nullcontext()
    else:
        from memlife.state.home import check_home

        check_home(store, claim=create)  # one store's side tables (state/home.py)
        path = settings().home / filename
        if not create and not path.exists():
            return _memory(schema)
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        # an erased record's inferred subject, a review item's owner: zeroed when deleted,
        # as in the store's own file, not left in free pages (a build's default may differ)
        conn.execute("PRAGMA secure_delete=ON")
        ctx = threading.RLock()
    with ctx:
        if create:
            conn.executescript(schema)
            return conn, ctx
        q = "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"
        if conn.execute(q, (table,)).fetchone() is not None:
            return conn, ctx
    if conn is not getattr(store, "connection", None):
        conn.close()
    return _memory(schema)
